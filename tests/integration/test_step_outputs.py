"""A step's output is what the database keeps, in the slice that made it as after a crash:
what Python code returns (dates, decimals, tuples, int keys, a pydantic model) is stored
as JSON and the next step reads that JSON, never the object; an output that can't be
stored stops the execution naming the step and why, with its failed attempt recorded.
In process: tests/support/answering_flow.py's ``shaped``."""

from __future__ import annotations

import pytest

from executions.models import Execution, Status, StepRun
from executions.services import execution_start
from tests.support.answering_flow import SHAPES  # registers ``shaped``
from tests.support.in_process import run_here

pytestmark = pytest.mark.django_db(transaction=True)


def ran(people, mode: str) -> Execution:
    assert mode in SHAPES
    execution, _ = execution_start(user=people["requester"].user, workflow="shaped", input={"mode": mode})
    return run_here(execution, worker="worker:test-outputs")


def test_what_python_returns_is_stored_as_json_and_read_back_as_stored(people):
    done = ran(people, "python")
    assert done.status == Status.COMPLETED, done.status_reason
    stored = done.outputs()["make"]
    assert stored == {
        "at": "2026-12-07T12:30:00Z",
        "amount": "12.50",
        "pair": [1, 2],
        "ids": [7],
        "1": "an int key",
        "charge": {"id": "ch_2", "created": "2026-12-07T12:30:00Z"},
    }
    # The step after it, in the same slice, read the stored JSON (a resumed one reads the same).
    assert done.outputs()["use"] == {"read": stored}


def test_an_empty_list_is_an_output_and_nothing_is_an_empty_one(people):
    assert ran(people, "falsy").outputs()["use"] == {"read": []}
    assert ran(people, "nothing").outputs()["use"] == {"read": {}}


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("nan", "make's output can't be stored: score: must be a finite number"),
        ("nul", "make's output can't be stored: name: must not contain NUL characters"),
        ("opaque", "make's output is not JSON: Object of type Opaque is not JSON serializable"),
        ("same_key", "make's output is not JSON: two keys of one object are both '1' as text (e.g. 1 and '1')"),
    ],
)
def test_an_output_that_cant_be_stored_names_the_step_and_records_the_attempt(people, mode, why):
    stopped = ran(people, mode)
    assert stopped.status == Status.NEEDS_ATTENTION and stopped.reason_code == "step_error"
    assert why in stopped.status_reason
    [attempt] = StepRun.objects.filter(execution=stopped)
    assert attempt.step == "make" and attempt.outcome == "failed" and why in attempt.error
