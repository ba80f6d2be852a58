"""What the Gemini API refuses in a job's settings, checked before anything is uploaded: a
``thinking_config`` the model would refuse (Gemini 2.5 takes a ``thinkingBudget`` in its
model's range, Gemini 3 a ``thinkingLevel``, never both). Its structured outputs
(``responseJsonSchema``) take any object schema.
"""

import re
from collections.abc import Mapping
from typing import Any

from maple_engine.errors import ConfigError
from maple_engine.providers.rules import ChatParams, RequestRules

#: Gemini 2.5's thinking budgets by model (``thinkingBudget``; -1: dynamic): the range, and
#: whether 0 turns thinking off. Gemini 3 models take a ``thinkingLevel`` instead.
THINKING_BUDGETS = (
    ("2.5-flash-lite", (512, 24576), True),
    ("2.5-flash", (1, 24576), True),
    ("2.5-pro", (128, 32768), False),
)
THINKING_LEVELS = ("minimal", "low", "medium", "high")


def check_params(asked: ChatParams) -> None:
    check_thinking(asked.model, asked.params)


def check_thinking(model: str, params: Mapping[str, Any]) -> None:
    """A ``thinking_config`` the model would refuse is one line before any upload."""
    thinking = params.get("thinking_config", params.get("thinkingConfig"))
    if thinking is None:
        return
    if not isinstance(thinking, dict):
        raise ConfigError(
            "--param thinking_config: give an object, e.g. "
            "--param 'thinking_config={\"thinkingBudget\": 1024}'."
        )
    budget = thinking.get("thinkingBudget", thinking.get("thinking_budget"))
    level = thinking.get("thinkingLevel", thinking.get("thinking_level"))
    generation = re.match(r"(?:models/)?gemini-(\d+)", model)
    third = generation is not None and int(generation.group(1)) >= 3
    if budget is not None and level is not None:
        raise ConfigError(
            "--param thinking_config: give thinkingBudget or thinkingLevel, not both."
        )
    if level is not None and (not third or str(level).lower() not in THINKING_LEVELS):
        fix = f"one of {', '.join(THINKING_LEVELS)}" if third else "thinkingBudget on this model"
        raise ConfigError(
            f"--param thinking_config: {model} does not take thinkingLevel {level!r}; use {fix}."
        )
    if budget is not None and not third:
        _check_budget(model, budget)


def _check_budget(model: str, budget: Any) -> None:
    for part, (low, high), can_stop in THINKING_BUDGETS:
        if part not in model:
            continue
        fits = isinstance(budget, int) and (
            budget == -1 or low <= budget <= high or (budget == 0 and can_stop)
        )
        if not fits:
            off = "0 to turn thinking off, " if can_stop else ""
            raise ConfigError(
                f"--param thinking_config: {model} takes a thinkingBudget of {low:,} to "
                f"{high:,} ({off}-1 for dynamic thinking), not {budget!r}."
            )
        return


RULES = RequestRules(
    label="Gemini",
    check_params=check_params,
    reasoning_params=("thinking_config", "thinkingConfig"),
)
