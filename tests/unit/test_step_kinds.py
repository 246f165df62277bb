"""Every kind of step has its replay and its resume-preview sentence, and every stuck
reason its operator action (issue 41): a kind or a reason added without them fails
here, instead of being skipped by replay or shown as "escalate".

A kind is one of three sorts: the engine's own (compute, effect, branch: ``REPLAYS`` and
``LATER`` in triage), a gate (a registered ``Gate``: replay checks what it binds, the
preview says it stops there), or a kind that plugs in (a registered ``StepHandler`` that
brings its own ``replay`` and ``later``) — such as examples/classify, imported here."""

from __future__ import annotations

import examples.classify.kind  # noqa: F401 - a kind keel doesn't ship, registered like any other
from executions import runtime
from executions.authoring.workflow import Step, StepKind
from executions.engine import gates
from executions.reasons import StuckReason
from executions.stuck import ACTION
from triage.preview import LATER, runs_later
from triage.replay import REPLAYS, _Replay


def test_every_step_kind_is_the_engines_a_gate_or_plugged_in_with_its_replay_and_preview():
    own, gate_kinds, plugged = set(REPLAYS), {g.kind for g in gates.registered()}, set(runtime.step_kinds())
    assert set(LATER) == own and all(callable(getattr(_Replay, method, None)) for method in REPLAYS.values())
    assert set(StepKind) <= own | gate_kinds | plugged, set(StepKind) - (own | gate_kinds | plugged)
    assert "classify" in plugged
    for name, handler in runtime.step_kinds().items():
        kind = type(handler)
        assert kind.replay is not runtime.StepHandler.replay, f"{name} doesn't say how it replays"
        assert kind.later is not runtime.StepHandler.later, f"{name} doesn't say what a resume does with it"


def test_the_preview_asks_a_plugged_kind_and_names_one_it_does_not_know():
    from examples.classify import workflow

    assert runs_later(workflow.flow.get_step("label")) == (
        "asks the model to label it one of refund, question, complaint; the answer is recorded"
    )
    assert runs_later(Step(name="x", label="X", kind="teleport")) == "runs (a teleport step)"


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
