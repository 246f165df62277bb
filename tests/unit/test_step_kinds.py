"""Every kind of step has its replay and its resume-preview sentence, and every stuck
reason its operator action (issue 41): a kind or a reason added without them fails
here, instead of being skipped by replay or shown as "escalate"."""

from __future__ import annotations

from executions.authoring.workflow import StepKind
from executions.reasons import StuckReason
from executions.stuck import ACTION
from triage.preview import LATER
from triage.replay import REPLAYS, _Replay


def test_every_step_kind_has_a_replay_and_a_preview_sentence():
    assert set(REPLAYS) == set(StepKind), set(StepKind) - set(REPLAYS)
    assert set(LATER) == set(StepKind), set(StepKind) - set(LATER)
    assert all(callable(getattr(_Replay, method, None)) for method in REPLAYS.values())


def test_every_stuck_reason_has_an_operator_action():
    assert set(ACTION) == set(StuckReason), set(StuckReason) - set(ACTION)
    assert set(ACTION.values()) <= {
        "wait",
        "check_workers",
        "escalate",
        "resume",
        "resolve",
        "cancel",
        "compensate",
        "restart",
    }
