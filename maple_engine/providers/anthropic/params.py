"""What Anthropic's Messages API refuses in a job's settings (Claude on Bedrock too), checked
before anything is uploaded:

- extended thinking (``thinking``) is for the models that have it (not the Claude 3 and 3.5
  models, `NO_THINKING`: platform.claude.com/docs/en/about-claude/models/overview, "Extended
  thinking"); it takes a ``budget_tokens`` of at least 1,024, below ``max_tokens`` (Maple's
  default, `DEFAULT_MAX_TOKENS`, when the job sets none), no ``temperature`` other than 1 nor
  ``top_k``, a ``top_p`` only from 0.95 to 1, and no ``tool_choice`` that forces a tool
  (platform.claude.com/docs/en/build-with-claude/extended-thinking, "Feature compatibility");
- the response schema (sent as ``output_config``) fits its structured-output subset: the root is
  an object, every object sets ``additionalProperties: false`` (properties may be optional),
  none of the keywords of ``STRICT_UNSUPPORTED`` nor numeric and string-length constraints
  (provider documentation, 2025-2026).
"""

from maple_engine.errors import ConfigError
from maple_engine.providers.anthropic.messages import DEFAULT_MAX_TOKENS
from maple_engine.providers.rules import ChatParams, RequestRules
from maple_engine.providers.schema_subset import STRICT_UNSUPPORTED, SchemaSubset

THINKING_MIN_BUDGET = 1024
#: model names (or Bedrock ids) holding one of these have no extended thinking
NO_THINKING: tuple[str, ...] = (
    "claude-3-haiku", "claude-3-sonnet", "claude-3-opus", "claude-3-5-",
    "claude-2", "claude-instant",
)  # fmt: skip
EXAMPLE = '--param max_tokens=4096 --param \'thinking={"type": "enabled", "budget_tokens": 2048}\''
THINKING_MIN_TOP_P = 0.95
# the tool choices that force tool use, which thinking refuses ("auto" and "none" it takes)
FORCING_TOOL_CHOICES = frozenset({"any", "tool"})
UNSUPPORTED = STRICT_UNSUPPORTED | {
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
}
SCHEMA = SchemaSubset(unsupported=UNSUPPORTED)


def check_thinking(asked: ChatParams) -> None:
    """Extended thinking's budget fits, and no sampling parameter it refuses is set."""
    params = asked.params
    thinking = params.get("thinking")
    if thinking is None:
        return
    if not isinstance(thinking, dict) or thinking.get("type") not in {"enabled", "disabled"}:
        raise ConfigError(f"--param thinking: give an object, e.g. {EXAMPLE}.")
    if thinking["type"] == "disabled":
        return
    if any(name in asked.model for name in NO_THINKING):
        raise ConfigError(
            f"--param thinking: {asked.model} has no extended thinking; drop the parameter, or "
            "use a model that has it (claude-sonnet-4-5, claude-haiku-4-5, claude-opus-4-1...)."
        )
    budget = thinking.get("budget_tokens")
    limit = params.get("max_tokens", DEFAULT_MAX_TOKENS)
    if not isinstance(budget, int) or budget < THINKING_MIN_BUDGET:
        raise ConfigError(
            f"--param thinking: budget_tokens must be a whole number of at least "
            f"{THINKING_MIN_BUDGET:,} (got {budget!r})."
        )
    if isinstance(limit, int) and budget >= limit:
        default = "" if "max_tokens" in params else " (Maple's default)"
        raise ConfigError(
            f"--param thinking: budget_tokens {budget:,} must be below max_tokens {limit:,}"
            f"{default}, which the thinking and the answer share: raise it, e.g. {EXAMPLE}."
        )
    if params.get("temperature", 1) != 1 or "top_k" in params:
        raise ConfigError(
            "--param thinking: extended thinking takes no temperature other than 1 and no "
            "top_k; drop them."
        )
    top_p = params.get("top_p", 1)
    if not isinstance(top_p, int | float) or not THINKING_MIN_TOP_P <= top_p <= 1:
        raise ConfigError(
            f"--param thinking: extended thinking takes a top_p from {THINKING_MIN_TOP_P} to 1 "
            f"(got {top_p!r}); raise it or drop it."
        )
    choice = params.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in FORCING_TOOL_CHOICES:
        raise ConfigError(
            f"--param thinking: extended thinking takes no tool_choice that forces a tool "
            f"(got type {choice['type']!r}); use type 'auto' or drop tool_choice."
        )


RULES = RequestRules(
    label="Anthropic", check_params=check_thinking, schema=SCHEMA, reasoning_params=("thinking",)
)
