"""The workflow fuzzer's pure parts (S60, tests/support/fuzz): every generated case renders
a module that imports only the authoring surface, registers exactly the steps the case
describes (guarded effects behind their gate, no claim that a provider de-duplicates
when it doesn't), and every kill names a step it renders; the invariants that need no
database catch what they are for."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from executions.authoring import registry
from tests.support.fuzz import invariants, loader
from tests.support.fuzz.api import Answers
from tests.support.fuzz.render import child_name, render
from tests.support.fuzz.runner import Played
from tests.support.fuzz.specs import Act, Case, Children, Flow, Wait, describe, steps_of
from tests.support.fuzz.strategies import cases, failpoints

FIRST_PARTY = {"accounts", "approvals", "artifacts", "config", "console", "executions", "metrics", "sandbox", "triage"}
FIRST_PARTY |= {"workflows", "tests", "notifications", "retention", "schedules", "fleet", "apikit", "dblocks"}


@pytest.fixture
def registered(tmp_path):
    """Load rendered modules into this process's registry; forget them afterwards."""
    saved = dict(registry._workflows)
    names: list[str] = []

    def load(case: Case, name: str):
        path = tmp_path / f"{name}.py"
        path.write_text(render(case, name))
        loader.load(str(path))
        names.append(name)
        return path

    yield load
    registry._workflows.clear()
    registry._workflows.update(saved)
    for name in names:
        sys.modules.pop(name, None)


def imported(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module.split(".")[0] in FIRST_PARTY:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] in FIRST_PARTY}
    return found


counter = iter(range(10**6))


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_every_generated_case_renders_the_workflow_it_describes(case, registered):
    name = f"fzunit{next(counter):05d}"
    path = registered(case, name)
    source = path.read_text()
    assert imported(source) <= {"executions.authoring", "approvals.gate"}
    assert describe(case).splitlines()[0] in " ".join(source.split())  # the case heads the module

    flows = [(name, case.main, "s")] + ([(child_name(name), case.child, "c")] if case.has_children else [])
    for workflow, flow, prefix in flows:
        declared = registry.get(workflow, 1)
        expected = steps_of(flow, prefix)
        assert [(s.name, str(s.kind)) for s in declared.steps] == [(s.name, s.kind) for s in expected]
        for step in declared.steps:
            if step.name.split("_")[1].startswith("apply"):
                assert step.guarded_by == step.name.split("_")[0] + "_review"

    rendered = {s.name for s in steps_of(case.main, "s") + (steps_of(case.child, "c") if case.has_children else [])}
    for kill in case.schedule.kills:
        assert kill.point in ("timer", "before_parent_wake") or kill.step.split(":")[0] in rendered
    if not case.schedule.orders_dedupe:  # an author never claims the order service de-duplicates when it doesn't
        acts = [s.block for s in steps_of(case.main, "s") + steps_of(case.child, "c") if isinstance(s.block, Act)]
        assert all(a.honors_key is False for a in acts if a.provider == "orders")


def test_a_case_offers_kills_at_every_step_and_effect_call():
    case = Case(main=Flow((Act("orders"), Children(1))), child=Flow((Wait(),)))
    names = {k.failpoint.removesuffix("=crash") for k in failpoints(case)}
    assert names == {
        "before_step:s1_orders",
        "after_step:s1_orders",
        "before_effect_call:s1_orders",
        "after_effect_call:s1_orders",
        "before_step:s2_kids",
        "after_step:s2_kids",
        "before_step:c1_wait",
        "after_step:c1_wait",
        "before_parent_wake",
    }


def played(**over) -> Played:
    base = Played(case=Case(), name="fz0001", source="", module=Path("fz0001.py"), answers=Answers())
    for key, value in over.items():
        setattr(base, key, value)
    return base


def execution(ref: str, status: str, **over) -> dict:
    item = {
        "id": ref,
        "workflow": "fz0001",
        "status": status,
        "current_step": "s1_wait",
        "due_at": None,
        "stuck": None,
        "lease": None,
        "pending_approval": None,
        "pending_gate": None,
        "children": [],
    }
    return {**item, **over}


def test_a_waiting_execution_with_nothing_to_wait_for_hangs_and_the_others_do_not():
    items = {
        "RUN_0001": execution("RUN_0001", "waiting"),  # children [] parked for ever: the bug S50 names
        "RUN_0002": execution("RUN_0002", "waiting", due_at="2030-01-01T00:00:00Z"),
        "RUN_0003": execution("RUN_0003", "needs_attention", stuck={"reason": "waiting_overdue"}),
        "RUN_0004": execution("RUN_0004", "waiting", pending_gate={"kind": "wait", "step": "s1_wait", "until": "x"}),
        "RUN_0005": execution("RUN_0005", "completed"),
        "RUN_0006": execution(
            "RUN_0006",
            "waiting",
            current_step="s2_kids",
            pending_gate={"kind": "children", "step": "s2_kids", "until": None},
            children=[{"id": "RUN_0007", "status": "running", "step": "s2_kids"}],
        ),
        "RUN_0008": execution("RUN_0008", "awaiting_approval", pending_approval={"id": 3}),
    }
    found = invariants.nothing_hangs(played(executions=items, stalled=["RUN_0009 running at s1_compute"]))
    assert len(found) == 2
    assert found[0].startswith("stalled: RUN_0009")
    assert found[1].startswith("RUN_0001 (fz0001) is waiting at s1_wait with no live lease")


def test_two_effects_under_one_key_5xx_and_unexpected_answers_are_violations():
    stats = {
        "keys": {"RUN_0001:s1_orders": {"calls": 2, "effects": 2}, "RUN_0002:s1_orders": {"calls": 3, "effects": 1}}
    }
    assert invariants.effect_keys(played(stats=stats)) == [
        "effect key RUN_0001:s1_orders: 2 provider effects (2 calls)"
    ]
    answers = Answers()
    answers.bad.append("POST /executions/RUN_0001/events → 500 {}")
    deliveries = [
        ("decision approve", "RUN_0001", 202, "first"),
        ("decision approve", "RUN_0001", 202, "same"),
        ("decision approve", "RUN_0001", 409, "new"),
        ("signal go_s2", "RUN_0001", 409, "same"),  # the same event id must answer the first answer again
        ("signal go_s2", "RUN_0001", 403, "first"),
    ]
    found = invariants.server_answers(played(answers=answers, deliveries=deliveries))
    assert found == [
        "the web server: POST /executions/RUN_0001/events → 500 {}",
        "signal go_s2 for RUN_0001 again under the same event id answered 409 (expected [202])",
        "signal go_s2 for RUN_0001 answered 403 (expected [202, 409])",
    ]


def test_one_execution_per_idempotency_key():
    items = {"RUN_0001": execution("RUN_0001", "completed"), "RUN_0002": execution("RUN_0002", "completed")}
    ok = played(executions=items, started=["RUN_0001"], restarted=[("RUN_0001", 200, "RUN_0001")])
    assert invariants._starts(ok) == ["1 starts, 2 executions of fz0001 listed"]
    twice = played(
        executions={"RUN_0001": items["RUN_0001"]}, started=["RUN_0001"], restarted=[("RUN_0001", 201, "RUN_0003")]
    )
    assert invariants._starts(twice) == [
        "a start repeated with its idempotency key answered 201 RUN_0003 (first: 201 RUN_0001)"
    ]


def test_an_execution_ended_with_an_action_in_doubt_is_a_violation():
    items = {
        "RUN_0001": execution("RUN_0001", "failed"),
        "RUN_0002": execution("RUN_0002", "needs_attention", stuck={"reason": "unknown_outcome"}),
        "RUN_0003": execution("RUN_0003", "completed"),
    }
    doubtful = [
        ("RUN_0001", "RUN_0001:s2_orders", "unknown"),
        ("RUN_0002", "RUN_0002:s2_orders", "unknown"),  # with a person: as it should be
        ("RUN_0003", "RUN_0003:s1_notify", "executing"),
    ]
    assert invariants.ended_in_doubt(items, doubtful) == [
        "RUN_0001 ended failed with RUN_0001:s2_orders unknown",
        "RUN_0003 ended completed with RUN_0003:s1_notify executing",
    ]
