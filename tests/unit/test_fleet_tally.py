"""The per-worker counters (issue 39, Flower's per-worker counters): a worker process's
``Tally`` of the tasks it ran itself — what its heartbeat carries."""

from __future__ import annotations

from types import SimpleNamespace

from executions.engine.dispatch import ADVANCE
from fleet.heartbeat import Tally

ADVANCE_TASK, SWEEP_TASK = SimpleNamespace(name=ADVANCE), SimpleNamespace(name="executions.sweep")


def test_a_tally_counts_started_succeeded_failed_and_names_the_slice_in_flight():
    tally = Tally()
    tally.started(ADVANCE_TASK, (42,))
    assert tally.payload() == {"ran": 1, "succeeded": 0, "failed": 0, "running": {"task": ADVANCE, "execution": 42}}
    tally.ended("SUCCESS")
    tally.started(SWEEP_TASK, ())
    assert tally.payload()["running"] == {"task": "executions.sweep", "execution": None}
    tally.ended("FAILURE")
    tally.started(ADVANCE_TASK, (7,))
    tally.ended("RETRY")  # neither: it ran, and will run again
    assert tally.payload() == {"ran": 3, "succeeded": 1, "failed": 1, "running": None}


def test_a_forked_pool_child_counts_nothing_into_its_parent_s_copy():
    """A prefork child inherits the tally; what it runs is never the parent's to report."""
    tally = Tally()
    tally.pid = -1  # as in a child: os.getpid() is not the maker's
    tally.started(ADVANCE_TASK, (42,))
    tally.ended("SUCCESS")
    assert tally.payload() == {"ran": 0, "succeeded": 0, "failed": 0, "running": None}
