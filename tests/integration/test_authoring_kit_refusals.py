"""The author's test kit refuses what can't work with a sentence, before it starts any
process; its waits measure the time they really waited. No process is started here
(tests/integration/test_authoring_kit.py runs the kit for real)."""

from __future__ import annotations

import time

import pytest

from executions.authoring.testing import Keel, WaitTimedOut
from executions.authoring.testing.kit import _statuses
from executions.authoring.testing.waiting import poll


def test_inside_a_tests_transaction_the_kit_refuses_to_start(db):
    with pytest.raises(RuntimeError, match="inside a transaction .* transactional_db"):
        Keel(modules="examples.expense_approval.workflow")


def test_a_module_that_does_not_import_is_named(transactional_db):
    with pytest.raises(ImportError, match=r"names myflows\.missing, which does not import: ModuleNotFoundError"):
        Keel(modules="myflows.missing")


def test_bad_arguments_are_named(transactional_db):
    with pytest.raises(ValueError, match="workers must be an integer of at least 1"):
        Keel(workers=0)
    with pytest.raises(ValueError, match="no status 'done'"):
        _statuses(("done",))
    with pytest.raises(ValueError, match="name the status"):
        _statuses(())
    for timeout in (0, -1, "5", True):
        with pytest.raises(ValueError, match="timeout must be a number of seconds above 0"):
            poll(lambda: True, timeout=timeout, what="x", last_seen=str)


def test_a_wait_that_runs_out_says_the_time_it_really_waited():
    looks = []

    def slow_look():
        looks.append(time.monotonic())
        time.sleep(0.3)  # a look that takes time: it counts in what was waited

    began = time.monotonic()
    with pytest.raises(WaitTimedOut) as timed_out:
        poll(slow_look, timeout=0.5, what="RUN_0001 to be completed", last_seen=lambda: "it is waiting")
    waited = time.monotonic() - began
    assert timed_out.value.timeout == 0.5
    assert 0.5 <= timed_out.value.waited <= waited
    assert str(timed_out.value) == (
        f"RUN_0001 to be completed: not after {timed_out.value.waited:.1f} s (timeout 0.5 s); it is waiting"
    )
    assert len(looks) >= 2  # it looked again at the deadline
