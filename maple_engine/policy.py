"""Retry policies per failure class (docs/architecture.md, "Failures and retries")."""

import dataclasses
from collections.abc import Mapping

from maple_engine.errors import ConfigError
from maple_engine.failures import FailureClass

UNLIMITED = -1

DEFAULT_RETRIES: dict[str, int] = {
    FailureClass.EXPIRED: UNLIMITED,
    FailureClass.RATE_LIMITED: UNLIMITED,
    FailureClass.SERVER_ERROR: 5,
    FailureClass.REFUSED: 1,  # 0 when sampling is deterministic: see `job_policy`
    FailureClass.INVALID_IMAGE: 1,
    FailureClass.INVALID_FILE: 1,
    FailureClass.INVALID_OUTPUT: 2,
    FailureClass.INVALID_REQUEST: 0,
    FailureClass.INSUFFICIENT_QUOTA: 0,
    FailureClass.MISSING: UNLIMITED,
}


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How many times each failure class is retried (``-1``: unlimited, bounded by job age)."""

    retries: Mapping[str, int] = dataclasses.field(default_factory=lambda: dict(DEFAULT_RETRIES))
    max_job_age_s: float = 72 * 3600.0
    check_images: bool = True

    def allows(self, failure_class: str, sends: int) -> bool:
        """May a row that failed with ``failure_class`` after ``sends`` sends be sent again?"""
        limit = self.retries.get(failure_class, 0)
        return limit == UNLIMITED or sends - 1 < limit

    def budget(self, sent_before: Mapping[str, int] | None = None) -> "SendBudget":
        """The sends an attempt may still spend on each row (`SendBudget`)."""
        return SendBudget(self.retries, sent_before or {})

    def with_overrides(self, overrides: Mapping[str, int]) -> "RetryPolicy":
        unknown = sorted(set(overrides) - {c.value for c in FailureClass})
        if unknown:
            raise ConfigError(
                f"Unknown failure class(es) {unknown} in the retry policy; "
                f"valid classes: {[c.value for c in FailureClass]}."
            )
        return dataclasses.replace(self, retries={**self.retries, **overrides})


@dataclasses.dataclass(frozen=True)
class SendBudget:
    """How often an attempt may still send each of its rows: a row is sent at most 1 + its
    failure class's retries times in all, however those sends are split between the requests
    of one real-time attempt and the attempts after it. ``sent_before``: each row's sends in the
    shard's earlier attempts (by custom id; a row not in it was never sent)."""

    retries: Mapping[str, int]
    sent_before: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def sends_left(self, failure_class: str, custom_id: str, cap: int) -> int:
        """Sends this attempt may spend on ``custom_id`` once a send failed with
        ``failure_class``, counting that one (at most ``cap``, at least the one made)."""
        limit = self.retries.get(failure_class, 0)
        if limit == UNLIMITED:
            return cap
        return max(1, min(cap, 1 + limit - self.sent_before.get(custom_id, 0)))

    def sends_before(self, custom_ids: tuple[str, ...]) -> int:
        """The most sends any of ``custom_ids`` had in the shard's earlier attempts."""
        return max((self.sent_before.get(custom_id, 0) for custom_id in custom_ids), default=0)


def deterministic(params: Mapping[str, object]) -> bool:
    """Does an identical request get an identical answer? (temperature 0, or top_k 1)"""
    return params.get("temperature") == 0 or params.get("top_k") == 1


def job_policy(
    retries: Mapping[str, int], params: Mapping[str, object], check_images: bool = True
) -> RetryPolicy:
    """The job's policy: the defaults, ``retries`` over them. A refusal is resent only when a
    resend can change the outcome: with random sampling, not at temperature 0 (the same request
    gets the same refusal, paid again) nor for a refusal a provider decides before generating
    (those rows are marked ``resendable`` False and never resent, `maple_engine.failures`)."""
    defaults: dict[str, int] = {FailureClass.REFUSED: 0} if deterministic(params) else {}
    base = RetryPolicy(retries={**DEFAULT_RETRIES, **defaults}, check_images=check_images)
    return base.with_overrides(retries)


def parse_retry_options(specs: list[str]) -> dict[str, int]:
    """``["refused=0", "server_error=unlimited"]`` -> overrides; bad specs are ConfigErrors."""
    overrides: dict[str, int] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep:
            raise ConfigError(f"--retry {spec!r}: expected CLASS=N or CLASS=unlimited.")
        try:
            count = UNLIMITED if value.strip() == "unlimited" else int(value)
        except ValueError as exc:
            raise ConfigError(f"--retry {spec!r}: N must be an integer or 'unlimited'.") from exc
        if count < 0 and value.strip() != "unlimited":
            raise ConfigError(
                f"--retry {spec!r}: a retry count cannot be negative; give 0 or more, or "
                f"'unlimited' (e.g. --retry {name.strip()}=0)."
            )
        overrides[name.strip()] = count
    return overrides


def check_retries(retries: dict[str, int]) -> None:
    bad = {
        name: count
        for name, count in retries.items()
        if isinstance(count, bool) or not isinstance(count, int) or count < UNLIMITED
    }
    if bad:
        raise ConfigError(
            f"Retry counts {bad} are not valid: give a count of 0 or more, or 'unlimited' "
            "(-1 in code)."
        )
