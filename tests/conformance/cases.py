"""The provider cases every promise of the conformance suite runs on: one row per ``--provider``
name, saying how the name is pointed at the emulator and which models it runs.

To hold a new provider to every promise, add its row to `CASES`; a name with no row must be in
`NO_CASE` with the reason (`test_registry.py` fails otherwise). A promise a name cannot keep
yet goes in the row's ``known_failures`` with the reason: the test then fails when it starts to
pass (a strict xfail), so the entry is removed with the fix.
"""

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path

#: ``env(url)``: the variables pointing a name at a server whose base URL is ``url``
Env = Callable[[str], dict[str, str]]

KEY = "sk-conformance"  # a key the emulator takes (it takes any key)
ROLE = "arn:aws:iam::123456789012:role/maple"
BUCKET = "maple-conformance"
#: the price file every case runs with: the models of a provider genai-prices does not price
PRICES = Path(__file__).with_name("prices.json")


def openai_style(prefix: str) -> Env:
    """``<PREFIX>_BASE_URL`` at the server's ``/v1`` and ``<PREFIX>_API_KEY``."""
    return lambda url: {f"{prefix}_BASE_URL": f"{url}/v1", f"{prefix}_API_KEY": KEY}


def root_style(prefix: str, base: str = "BASE_URL") -> Env:
    """``<PREFIX>_<BASE>`` at the server's root and ``<PREFIX>_API_KEY``."""
    return lambda url: {f"{prefix}_{base}": url, f"{prefix}_API_KEY": KEY}


def on_emulator(url: str) -> dict[str, str]:
    return {"MAPLE_EMULATOR_URL": url}


def bedrock(url: str) -> dict[str, str]:
    """The emulator as Bedrock's control plane; S3 is moto's (``AWS_ENDPOINT_URL_S3``, set by
    the suite's fixture with the AWS keys)."""
    return {"AWS_ENDPOINT_URL_BEDROCK": url, "MAPLE_BEDROCK_ROLE_ARN": ROLE}


def openrouter(url: str) -> dict[str, str]:
    """The emulator as OpenRouter's API (served under ``/openrouter/api/v1``) and its key."""
    return {"OPENROUTER_BASE_URL": f"{url}/openrouter/api/v1", "OPENROUTER_API_KEY": KEY}


def bedrock_openai(url: str) -> dict[str, str]:
    """The emulator as Bedrock's Runtime OpenAI API (served under ``/bedrock-runtime``), the
    Bedrock API key and the batch service role; S3 is moto's, as for ``bedrock``."""
    return {
        "BEDROCK_OPENAI_BASE_URL": f"{url}/bedrock-runtime/openai/v1",
        "AWS_BEARER_TOKEN_BEDROCK": KEY,
        "MAPLE_BEDROCK_ROLE_ARN": ROLE,
    }


@dataclasses.dataclass(frozen=True)
class Case:
    """One ``--provider`` name as the suite runs it."""

    provider: str  # the --provider name
    env: Env  # the variables pointing it at the emulator
    model: str  # a chat model it prices
    key: str | None  # the variable holding its API key; None: it takes no key
    embed_model: str | None = None  # a model for `maple embed`; None: it does not embed
    embed_flags: tuple[str, ...] = ()  # what `maple embed` needs besides (e.g. dimensions)
    rows: int = 12  # rows of a job
    batch_rows: int = 6  # rows a batch (or real-time shard) takes: Bedrock's jobs need 100
    on_s3: bool = False  # its storage root must be s3:// (moto's server)
    # its creates carry an idempotency key (Bedrock's clientRequestToken): the same create
    # sent again makes nothing new, so its client may repeat it
    keyed_creates: bool = False
    known_failures: Mapping[str, str] = dataclasses.field(default_factory=dict)  # promise: why
    # The name whose provider code it runs with other variables (an OpenAI-compatible vendor
    # profile): the default pass runs the cheap promises on that name, the long pass on both.
    same_code_as: str | None = None
    # A second row of a name, run with other settings (Azure's v1 API): its label in test ids
    variant: str | None = None

    @property
    def id(self) -> str:
        return self.provider if self.variant is None else f"{self.provider}-{self.variant}"

    @property
    def batches(self) -> int:
        """The batches (or real-time shards) a job of the case's rows is cut into."""
        return -(-self.rows // self.batch_rows)


OPENAI = openai_style("OPENAI")
GEMINI = root_style("GEMINI")
ANTHROPIC = root_style("ANTHROPIC")
MISTRAL = root_style("MISTRAL")
AZURE = root_style("AZURE_OPENAI", "ENDPOINT")


def azure_v1(url: str) -> dict[str, str]:
    """Azure's v1 API: its endpoint and key, ``AZURE_OPENAI_API_VERSION=v1``."""
    return {**AZURE(url), "AZURE_OPENAI_API_VERSION": "v1"}


GENERIC = openai_style("MAPLE")
EMBED_3 = "text-embedding-3-small"
GEMINI_CHAT, GEMINI_EMBED = "gemini-2.5-flash", "gemini-embedding-001"
CLAUDE = "claude-haiku-4-5"
MISTRAL_CHAT, MISTRAL_EMBED = "mistral-small-latest", "mistral-embed"
OPENROUTER_CHAT = "openai/gpt-4o-mini"  # a model genai-prices' openrouter prices
GPT_OSS = "openai.gpt-oss-20b-1:0"  # an OpenAI model on Bedrock (the suite's price file)
# the OpenAI-compatible vendor profiles: name, variables' prefix, chat model, embedding model
PROFILES = [
    ("together", "TOGETHER", "meta-llama/Llama-3.3-70B-Instruct-Turbo", None),
    ("groq", "GROQ", "llama-3.1-8b-instant", None),
    ("xai", "XAI", "grok-3-mini", None),
    ("doubleword", "DOUBLEWORD", "Qwen/Qwen3-14B-FP8", "Qwen/Qwen3-Embedding-8B"),
    # genai-prices has no DeepInfra: its models are priced by the suite's price file (PRICES)
    ("deepinfra", "DEEPINFRA", "meta-llama/Meta-Llama-3.1-8B-Instruct", "BAAI/bge-large-en-v1.5"),
]

CASES: list[Case] = [
    Case("openai", OPENAI, "gpt-4o-mini", "OPENAI_API_KEY", EMBED_3),
    Case("openai-realtime", OPENAI, "gpt-4o-mini", "OPENAI_API_KEY", EMBED_3),
    Case("openai-flex", OPENAI, "gpt-4o-mini", "OPENAI_API_KEY"),
    Case("openai-priority", OPENAI, "gpt-4o-mini", "OPENAI_API_KEY"),
    Case("emulator", on_emulator, "gpt-4o-mini", None, EMBED_3),
    Case("openai-server", GENERIC, "gpt-4o-mini", "MAPLE_API_KEY", EMBED_3),
    Case("openai-compatible", GENERIC, "gpt-4o-mini", "MAPLE_API_KEY", EMBED_3),
    Case("openai-compatible-realtime", GENERIC, "gpt-4o-mini", "MAPLE_API_KEY", EMBED_3),
    *(
        Case(
            f"{name}{twin}",
            openai_style(prefix),
            chat,
            f"{prefix}_API_KEY",
            embed,
            same_code_as=f"openai-compatible{twin}",
        )
        for name, prefix, chat, embed in PROFILES
        for twin in ("", "-realtime")
    ),
    Case(
        "anthropic",
        ANTHROPIC,
        CLAUDE,
        "ANTHROPIC_API_KEY",
        known_failures={
            "lost_create": "a message batch holds no metadata: a batch whose create answered "
            "500 is matched by its size and time, and two shards of one size created at once "
            "cannot be told apart, so the create is sent again"
        },
    ),
    Case("anthropic-realtime", ANTHROPIC, CLAUDE, "ANTHROPIC_API_KEY"),
    Case("gemini", GEMINI, GEMINI_CHAT, "GEMINI_API_KEY", GEMINI_EMBED),
    Case("gemini-realtime", GEMINI, GEMINI_CHAT, "GEMINI_API_KEY", GEMINI_EMBED),
    Case("gemini-flex", GEMINI, GEMINI_CHAT, "GEMINI_API_KEY"),
    Case("gemini-priority", GEMINI, GEMINI_CHAT, "GEMINI_API_KEY"),
    Case(
        "azure-openai",
        AZURE,
        "gpt-4o-mini",
        "AZURE_OPENAI_API_KEY",
        EMBED_3,
        known_failures={
            "embed": "Azure's dated batch API takes chat lines only: maple embed is refused "
            "before upload, naming AZURE_OPENAI_API_VERSION=v1 (the v1 row embeds)"
        },
    ),
    Case("azure-openai-realtime", AZURE, "gpt-4o-mini", "AZURE_OPENAI_API_KEY", EMBED_3),
    Case("azure-openai", azure_v1, "gpt-4o-mini", "AZURE_OPENAI_API_KEY", EMBED_3, variant="v1"),
    Case(
        "azure-openai-realtime",
        azure_v1,
        "gpt-4o-mini",
        "AZURE_OPENAI_API_KEY",
        EMBED_3,
        variant="v1",
    ),
    Case("mistral", MISTRAL, MISTRAL_CHAT, "MISTRAL_API_KEY", MISTRAL_EMBED),
    Case("mistral-realtime", MISTRAL, MISTRAL_CHAT, "MISTRAL_API_KEY", MISTRAL_EMBED),
    Case("bedrock-openai", bedrock_openai, GPT_OSS, "AWS_BEARER_TOKEN_BEDROCK", on_s3=True),
    Case("bedrock-openai-realtime", bedrock_openai, GPT_OSS, "AWS_BEARER_TOKEN_BEDROCK"),
    Case(
        "openrouter",
        openrouter,
        OPENROUTER_CHAT,
        "OPENROUTER_API_KEY",
        known_failures={
            "lost_create": "an inline batch holds no metadata: a batch whose create answered "
            "500 is matched by its size and time, and two shards of one size created at once "
            "cannot be told apart, so the create is sent again"
        },
    ),
    Case("openrouter-realtime", openrouter, OPENROUTER_CHAT, "OPENROUTER_API_KEY"),
    Case(
        "bedrock",
        bedrock,
        "anthropic.claude-3-haiku-20240307-v1:0",
        "AWS_ACCESS_KEY_ID",
        "amazon.titan-embed-text-v2:0",
        ("--dimensions", "256"),
        rows=200,
        batch_rows=100,
        on_s3=True,
        keyed_creates=True,
        known_failures={
            "lost_lines": "the lost records are resent as a job of their own, below Bedrock's "
            "100-record minimum per job: they fail `not sent` and name another provider"
        },
    ),
]

#: registered names with no case row, and why
NO_CASE: dict[str, str] = {}
