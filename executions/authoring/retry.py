"""Retry policy: what a failure of each type leads to, and when the next attempt is due.

Pure functions: no clock, no database. The runner applies the verdict (schedule a
retry with a due time the sweeper honours, fail, or ask a person).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import StrEnum

from ..errors import FailureKind

K = FailureKind


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """Per step. ``max_attempts`` counts every attempt, the first included.

    ``retry_on``: failure kinds worth another attempt. ``outcome_unknown`` is in it by
    default because its "retry" is a reconciliation (lookup by key) first, never a
    blind resend. ``timeout`` bounds one external call of an effect step (seconds).
    """

    max_attempts: int = 5
    max_elapsed_seconds: float = 1800.0
    initial_backoff_seconds: float = 1.0
    max_backoff_seconds: float = 300.0
    multiplier: float = 2.0
    jitter: float = 0.2
    retry_on: frozenset[FailureKind] = field(
        default_factory=lambda: frozenset({K.TRANSIENT, K.RATE_LIMITED, K.OUTCOME_UNKNOWN})
    )
    timeout: float | None = None


DEFAULT = RetryPolicy()


class Verdict(StrEnum):
    RETRY = "retry"  # retry_pending until the due time
    FAIL = "fail"  # stop for good: failed
    ATTENTION = "attention"  # a person decides: needs_attention


@dataclass(frozen=True)
class Ruling:
    """What the retry policy rules for one failed attempt: retry after ``delay_seconds``,
    fail, or ask a person; ``reason`` says why."""

    verdict: Verdict
    delay_seconds: float = 0.0
    reason: str = ""


# What each kind leads to when it isn't retried (or retries are used up).
WHEN_NOT_RETRIED = {
    K.TRANSIENT: Verdict.FAIL,
    K.RATE_LIMITED: Verdict.FAIL,
    K.INVALID_INPUT: Verdict.FAIL,  # the same input can't succeed
    K.PERMISSION: Verdict.ATTENTION,  # someone must grant or change something; no blind retry
    K.OUTCOME_UNKNOWN: Verdict.ATTENTION,  # it may have happened: a person establishes the outcome
    K.BUSINESS_REJECTION: Verdict.FAIL,
}


def backoff_seconds(policy: RetryPolicy, attempt: int, *, rng: random.Random | None = None) -> float:
    """Exponential backoff with jitter after failed attempt number ``attempt`` (1-based)."""
    base = min(policy.max_backoff_seconds, policy.initial_backoff_seconds * policy.multiplier ** (attempt - 1))
    spread = base * policy.jitter
    return max(0.0, base + (rng or random).uniform(-spread, spread))


def decide(
    policy: RetryPolicy,
    *,
    kind: FailureKind,
    attempt: int,
    elapsed_seconds: float,
    retry_after: float | None = None,
    seconds_to_deadline: float | None = None,
    rng: random.Random | None = None,
) -> Ruling:
    """What to do after failed attempt ``attempt`` of a step, ``elapsed_seconds`` after its first."""
    if kind not in policy.retry_on:
        return Ruling(WHEN_NOT_RETRIED[kind], reason=f"{kind} is not retried")
    if attempt >= policy.max_attempts:
        return Ruling(WHEN_NOT_RETRIED[kind], reason=f"retries exhausted: {attempt} of {policy.max_attempts} attempts")
    delay = backoff_seconds(policy, attempt, rng=rng)
    if kind == K.RATE_LIMITED and retry_after is not None:
        delay = max(delay, retry_after)  # the provider said when; never earlier
    # Out of time ends the retries as running out of attempts does (an unknown outcome goes
    # to a person: it may have happened).
    if elapsed_seconds + delay > policy.max_elapsed_seconds:
        return Ruling(
            WHEN_NOT_RETRIED[kind], reason=f"retrying would exceed {policy.max_elapsed_seconds:g}s for this step"
        )
    if seconds_to_deadline is not None and delay > seconds_to_deadline:
        return Ruling(WHEN_NOT_RETRIED[kind], reason="the next attempt would come after the execution's deadline")
    return Ruling(
        Verdict.RETRY, delay_seconds=delay, reason=f"attempt {attempt} failed ({kind}); retrying in {delay:.1f}s"
    )
