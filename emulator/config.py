"""Emulator settings shared by the CLI, the in-process server and the test fixtures."""

from collections.abc import Iterable
from dataclasses import dataclass, field

from emulator.core.labels import RULES
from emulator.core.ratelimit import LIMITERS

#: Fault classes accepted by ``--fail CLASS=RATE``; see ``emulator.core.faults`` for their wire
#: shapes.
FAULT_CLASSES: tuple[str, ...] = (
    "rate_limited",
    "server_error",
    "refused",
    "invalid_image",
    "invalid_output",
    "expired",
    "insufficient_quota",
    "invalid_request",
)


@dataclass
class EmulatorConfig:
    """How the emulator listens, how long batches take, and which faults it injects.

    ``fail`` maps a fault class to a rate in [0, 1]. ``control_fail`` is the rate of 500s on the
    files/batches control endpoints; ``None`` means a quarter of the ``server_error`` rate.
    The ``*_max_*`` limits default to the providers' real ones; tests lower them to stay fast.
    """

    host: str = "127.0.0.1"
    port: int = 0
    # What ``GET /v1/models`` lists (an OpenAI-compatible server's first contact); every
    # model name is served whether listed or not.
    models: tuple[str, ...] = (
        "gpt-4o-mini",
        "gpt-4.1-mini",
        "text-embedding-3-small",
        "text-embedding-3-large",
        "claude-haiku-4-5",
    )
    seed: int = 0
    batch_seconds: float = 2.0
    #: sigma of the log-normal each batch's duration is drawn from (0: every batch takes
    #: ``batch_seconds``), and the share of batches that stall ``stall_factor`` times longer
    batch_seconds_spread: float = 0.0
    #: seconds each batch takes on top of ``batch_seconds`` per 1,000 requests in it (0: every
    #: batch takes the same time whatever its size)
    batch_seconds_per_1k: float = 0.0
    stall: float = 0.0
    stall_factor: float = 50.0
    #: Lines a batch loses or repeats (``emulator.core.line_fates``): the share of answered
    #: lines a batch that ran every request leaves out of its results (counted as succeeded,
    #: not billed), and the share it writes twice (billed once).
    drop_lines: float = 0.0
    duplicate_lines: float = 0.0
    fail: dict[str, float] = field(default_factory=dict)
    rpm: int | None = None
    tpm: int | None = None
    #: Length of the windows the RPM/TPM limits are enforced over (1: per second; 60: a full
    #: minute). Each window holds its share of the per-minute limit.
    burst_seconds: float = 1.0
    #: How RPM/TPM are enforced (``emulator.core.ratelimit``): ``window`` (fixed windows of
    #: ``burst_seconds``) or ``bucket`` (a continuous token bucket holding ``burst_seconds`` of
    #: the limit)
    limiter: str = "window"
    control_fail: float | None = None
    embedding_dimensions: int = 16
    openai_max_requests: int = 50_000
    openai_max_bytes: int = 200 * 1024 * 1024
    anthropic_max_requests: int = 100_000
    anthropic_max_bytes: int = 256 * 1024 * 1024
    gemini_max_inline_bytes: int = 20 * 1024 * 1024
    #: Gemini batches that run at once; the others wait, highest ``batch.priority`` first
    #: (then oldest), and their time starts when they start. None: every batch runs at once.
    gemini_batch_slots: int | None = None
    gemini_max_file_bytes: int = 2 * 1024 * 1024 * 1024
    #: How long an uploaded Gemini file lives before it is deleted (Google: 48 hours,
    #: https://ai.google.dev/gemini-api/docs/files); tests shorten it to see files expire.
    gemini_file_retention_s: float = 48 * 3600
    #: Bedrock batch inference: where the emulator reads inputs and writes outputs, and the
    #: default quotas (records per job 100-50,000, 1 GB per input file, 20 jobs in flight).
    s3_endpoint: str | None = None
    bedrock_min_records: int = 100
    bedrock_max_records: int = 50_000
    bedrock_max_bytes: int = 1024 * 1024 * 1024
    bedrock_max_jobs: int = 20
    #: Queue limits (None: unlimited): OpenAI's prompt tokens enqueued per model, and the
    #: requests in unfinished Anthropic Message Batches (``emulator.core.queue_limits``).
    enqueued_token_limit: int | None = None
    anthropic_queue_limit: int | None = None
    #: API and admin keys -> organisation id (a key not listed belongs to ``org-emulator``):
    #: the admin reports show one organisation's spend, from every key of it.
    organizations: dict[str, str] = field(default_factory=dict)
    #: API keys -> Anthropic workspace id (a key not listed is in the default workspace, whose
    #: reports show ``workspace_id`` null): Anthropic bills a request to its key's workspace.
    workspaces: dict[str, str] = field(default_factory=dict)
    #: OpenAI's flex tier (``emulator.core.flex``): the share of flex requests answered 429
    #: ``resource_unavailable``, and how much longer a flex answer takes.
    flex_unavailable: float = 0.0
    flex_delay_s: float = 0.05
    #: OpenAI's priority tier (``emulator.core.flex``): its answers take the real-time latency
    #: (``realtime_latency_s``) divided by this.
    priority_speedup: float = 4.0
    #: Gemini's priority tier: the ``"serviceTier": "priority"`` requests served at priority
    #: before the project's priority limit is reached; the later ones are served at standard,
    #: which only the ``x-gemini-service-tier`` response header says (None: no limit).
    gemini_priority_limit: int | None = None
    #: Seconds a real-time answer (chat completions, embeddings, messages) takes beyond the
    #: limiter, drawn uniformly from (low, high): a real API's latency.
    realtime_latency_s: tuple[float, float] = (0.0, 0.0)
    #: A model server's capacity: at most this many real-time answers are worked on at once,
    #: the rest wait their turn (queueing delay, no 429), so throughput stops rising at
    #: ``server_slots / latency``: the knee a self-hosted server has; like such a server it
    #: then sends no rate-limit headers. 0: no such bound.
    server_slots: int = 0
    #: Answer without token usage (OpenAI's ``usage``, Gemini's ``usageMetadata``), as some
    #: OpenAI-compatible servers and Gemini embedding replies do; billing still counts them.
    omit_usage: bool = False
    #: Answer embeddings at the model's own length whatever ``dimensions`` (Mistral's
    #: ``output_dimension``) asks, as an OpenAI-compatible server that does not shorten vectors
    #: does, and a gateway that drops the field.
    ignore_dimensions: bool = False
    #: Fetch the http(s) URLs of image and file parts as the provider would: a reply names the
    #: file fetched, its tokens are billed, and a URL that cannot be fetched (or decoded) fails
    #: its request the provider's way (``emulator.core.files``). Off: URLs are not fetched, and
    #: cost nothing (inline files are read either way).
    fetch_urls: bool = False
    #: An AI gateway in front (``emulator.core.gateway``): headers every provider call must carry
    #: (400 naming the first missing), and batch/file objects re-shaped as LiteLLM's proxy
    #: returns them (``null`` for absent optional fields, extra fields).
    required_headers: tuple[str, ...] = ()
    gateway_nulls: bool = False
    #: Fields a gateway needs in the batch create's JSON body and the upload's form (400 naming
    #: the first missing), as LiteLLM's proxy needs ``custom_llm_provider``.
    required_body_fields: tuple[str, ...] = ()
    #: The ``completion_window`` values an OpenAI-compatible batch create accepts (OpenAI: 24h;
    #: an OpenAI-compatible vendor's profile may take others).
    completion_windows: tuple[str, ...] = ("24h",)
    #: How a reply of one enum or boolean field is chosen (``emulator.core.labels``): ``first``
    #: (the first enum value, true) or ``keywords`` (by the words of the prompt), and the share
    #: of those answers flipped, chosen by the prompt.
    label_rule: str = "first"
    label_noise: float = 0.0
    #: Where OpenAI-style batch events are pushed when a batch ends (``emulator.core.webhooks``),
    #: signed with ``webhook_secret`` (``whsec_`` + base64, as OpenAI's dashboard gives one).
    webhook_url: str | None = None
    webhook_secret: str | None = None

    def __post_init__(self) -> None:
        for name, rate in self.fail.items():
            _check_fault(name, rate)
        for name in ("enqueued_token_limit", "anthropic_queue_limit"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        _check_labels(self.label_rule, self.label_noise)
        for name in ("batch_seconds", "batch_seconds_per_1k", "batch_seconds_spread"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        _check_webhook(self.webhook_url, self.webhook_secret)
        if not 0.0 <= self.stall <= 1.0 or self.stall_factor < 1:
            raise ValueError(
                f"stall must be in [0, 1] and stall_factor >= 1, got {self.stall}, "
                f"{self.stall_factor}"
            )
        low, high = self.realtime_latency_s
        if not 0 <= low <= high:
            raise ValueError(
                f"latency must be LOW-HIGH seconds, 0 <= LOW <= HIGH, got {low}-{high}"
            )
        for name in ("flex_unavailable", "drop_lines", "duplicate_lines"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {getattr(self, name)}")
        if self.priority_speedup < 1:
            raise ValueError(f"priority_speedup must be >= 1, got {self.priority_speedup}")
        if self.server_slots < 0:
            raise ValueError(f"server_slots must be >= 0, got {self.server_slots}")
        _check_limiter(self.limiter, self.burst_seconds)

    @property
    def control_fail_rate(self) -> float:
        """Rate of injected 500s on control endpoints (files, batch create/get/list/cancel)."""
        if self.control_fail is not None:
            return self.control_fail
        return self.fail.get("server_error", 0.0) / 4


def _check_limiter(limiter: str, burst_seconds: float) -> None:
    if not 0 < burst_seconds <= 60:
        raise ValueError(f"burst_seconds must be in (0, 60], got {burst_seconds}")
    if limiter not in LIMITERS:
        raise ValueError(f"limiter must be one of {', '.join(LIMITERS)}, got {limiter}")


def _check_labels(rule: str, noise: float) -> None:
    if rule not in RULES:
        raise ValueError(f"label_rule must be one of {', '.join(RULES)}, got {rule}")
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"label_noise must be between 0 and 1, got {noise}")


def _check_fault(name: str, rate: float) -> None:
    if name not in FAULT_CLASSES:
        raise ValueError(f"unknown fault class {name!r}; valid classes: {', '.join(FAULT_CLASSES)}")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"fault rate for {name!r} must be between 0 and 1, got {rate}")


def parse_fail(specs: list[str]) -> dict[str, float]:
    """Turn ``["rate_limited=0.2", "refused=0.01"]`` into ``{"rate_limited": 0.2, ...}``.

    Raises ``ValueError`` naming the valid classes when a spec is malformed or unknown.
    """
    rates: dict[str, float] = {}
    for spec in specs:
        name, sep, raw_rate = spec.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError(
                f"fault spec {spec!r} must look like CLASS=RATE, e.g. rate_limited=0.2; "
                f"valid classes: {', '.join(FAULT_CLASSES)}"
            )
        try:
            rate = float(raw_rate)
        except ValueError as exc:
            raise ValueError(f"fault spec {spec!r}: RATE must be a number in [0, 1]") from exc
        _check_fault(name, rate)
        rates[name] = rate
    return rates


def parse_organizations(specs: Iterable[str]) -> dict[str, str]:
    """Turn ``["sk-b=org-b"]`` into ``{"sk-b": "org-b"}`` (``ValueError`` when malformed)."""
    return _key_pairs(specs, "organization", "KEY=ORG, e.g. sk-b=org-b")


def parse_workspaces(specs: Iterable[str]) -> dict[str, str]:
    """Turn ``["sk-ant-b=wrkspc_b"]`` into ``{"sk-ant-b": "wrkspc_b"}`` (``ValueError`` when
    malformed)."""
    return _key_pairs(specs, "workspace", "KEY=WORKSPACE, e.g. sk-ant-b=wrkspc_b")


def _key_pairs(specs: Iterable[str], what: str, form: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"{what} {spec!r} must look like {form}")
        found[key.strip()] = value.strip()
    return found


def _check_webhook(url: str | None, secret: str | None) -> None:
    if (url is None) != (secret is None):
        raise ValueError("--webhook-url and --webhook-secret go together: give both")
