"""The retry policy's verdicts (pure logic: no clock, no database)."""

from __future__ import annotations

import random

import pytest

from executions.authoring.retry import RetryPolicy, Verdict, backoff_seconds, decide
from executions.errors import FailureKind as K

POLICY = RetryPolicy(max_attempts=4, initial_backoff_seconds=1, multiplier=2, max_backoff_seconds=5, jitter=0.2)


def test_backoff_grows_exponentially_within_jitter_and_is_capped():
    rng = random.Random(7)
    for attempt, base in [(1, 1), (2, 2), (3, 4), (4, 5), (9, 5)]:
        for _ in range(50):
            delay = backoff_seconds(POLICY, attempt, rng=rng)
            assert base * 0.8 <= delay <= base * 1.2


def test_transient_failures_retry_until_the_attempt_limit_then_fail():
    verdicts = [decide(POLICY, kind=K.TRANSIENT, attempt=n, elapsed_seconds=0).verdict for n in (1, 2, 3, 4)]
    assert verdicts == [Verdict.RETRY, Verdict.RETRY, Verdict.RETRY, Verdict.FAIL]
    assert "retries exhausted: 4 of 4" in decide(POLICY, kind=K.TRANSIENT, attempt=4, elapsed_seconds=0).reason


def test_rate_limit_never_retries_before_retry_after():
    decision = decide(POLICY, kind=K.RATE_LIMITED, attempt=1, elapsed_seconds=0, retry_after=30)
    assert decision.verdict == Verdict.RETRY and decision.delay_seconds >= 30


@pytest.mark.parametrize(
    ("kind", "verdict"),
    [(K.INVALID_INPUT, Verdict.FAIL), (K.PERMISSION, Verdict.ATTENTION), (K.BUSINESS_REJECTION, Verdict.FAIL)],
)
def test_kinds_that_are_never_retried(kind, verdict):
    decision = decide(POLICY, kind=kind, attempt=1, elapsed_seconds=0)
    assert decision.verdict == verdict and "not retried" in decision.reason


def test_unknown_outcome_is_reconciled_then_handed_to_a_person():
    assert decide(POLICY, kind=K.OUTCOME_UNKNOWN, attempt=1, elapsed_seconds=0).verdict == Verdict.RETRY
    assert decide(POLICY, kind=K.OUTCOME_UNKNOWN, attempt=4, elapsed_seconds=0).verdict == Verdict.ATTENTION


def test_elapsed_time_and_deadline_bound_retries():
    assert (
        decide(RetryPolicy(max_elapsed_seconds=10), kind=K.TRANSIENT, attempt=1, elapsed_seconds=9.5).verdict
        == Verdict.FAIL
    )
    late = decide(POLICY, kind=K.RATE_LIMITED, attempt=1, elapsed_seconds=0, retry_after=60, seconds_to_deadline=30)
    assert late.verdict == Verdict.FAIL and "deadline" in late.reason


def test_an_unknown_outcome_out_of_time_goes_to_a_person_not_to_failed():
    """It may have happened: running out of the step's window or the execution's deadline
    ends its reconciliation as running out of attempts does, with a person, never ``failed``."""
    window = decide(RetryPolicy(max_elapsed_seconds=10), kind=K.OUTCOME_UNKNOWN, attempt=1, elapsed_seconds=9.5)
    assert window.verdict == Verdict.ATTENTION and "would exceed 10s" in window.reason
    late = decide(POLICY, kind=K.OUTCOME_UNKNOWN, attempt=1, elapsed_seconds=0, seconds_to_deadline=0.1)
    assert late.verdict == Verdict.ATTENTION and "deadline" in late.reason
