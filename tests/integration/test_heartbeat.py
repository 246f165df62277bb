"""One heartbeat thread per process beats for every slice in flight (issue 25,
executions.engine.leases: ``Heartbeat``, ``_Beater``).

- A beat held up by a row lock someone else holds (an operator's transaction on that
  execution) waits at most an interval: the other slices' leases are still extended.
- The thread outlives a failed beat, and lets its connection go when no slice is in flight.
"""

from __future__ import annotations

import time

import psycopg
from django.contrib.auth import get_user_model
from django.db import connection

import bench.flows  # noqa: F401 - registers bench_noop5
from executions.engine import leases
from executions.models import Execution
from tests.support.records import pending


def _dsn() -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


def _lease_of(pk: int):
    return Execution.objects.filter(pk=pk).values_list("lease_expires_at", flat=True).get()


def _backends(other: psycopg.Connection) -> set[int]:
    """The client connections to the test database, but the test's own and ``other``.

    Earlier tests of this process may have left connections open (a thread's), so a
    test compares these sets before and after, not their sizes."""
    own = {connection.connection.info.backend_pid, other.info.backend_pid}
    rows = other.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'"
    ).fetchall()
    return {pid for (pid,) in rows} - own


def test_a_beat_held_up_by_a_row_lock_delays_no_other_slice(transactional_db, settings):
    settings.RUNTIME_LEASE_SECONDS = 1.5  # a beat every 0.5 s
    user = get_user_model().objects.create_user("beats")
    held, free = pending(user, "bench_noop5"), pending(user, "bench_noop5")
    lease_held = leases.acquire(held.pk, owner="worker:test-held")
    lease_free = leases.acquire(free.pk, owner="worker:test-free")
    with psycopg.connect(_dsn()) as operator:  # an operator's transaction holds one execution's row
        operator.execute("SELECT 1 FROM executions_execution WHERE id = %s FOR UPDATE", [held.pk])
        with leases.Heartbeat(lease_held), leases.Heartbeat(lease_free) as beating:
            extended = set()
            ends = time.monotonic() + 3.5
            while time.monotonic() < ends:
                extended.add(_lease_of(free.pk))
                time.sleep(0.05)
            # Without the beat's time limit the held row's beat would wait the whole 3.5 s
            # and the other lease, 1.5 s long, would have lapsed.
            assert len(extended) >= 4, extended
            assert not beating.lost.is_set()
            operator.rollback()
            before = _lease_of(held.pk)
            time.sleep(1.2)
            assert _lease_of(held.pk) > before  # the held row's beats go through again once it is free


def test_the_beater_lets_its_connection_go_with_no_slice_in_flight(transactional_db, settings):
    settings.RUNTIME_LEASE_SECONDS = 1.5
    user = get_user_model().objects.create_user("beats")
    execution = pending(user, "bench_noop5")
    lease = leases.acquire(execution.pk, owner="worker:test-idle")
    with psycopg.connect(_dsn(), autocommit=True) as observer:
        before = _backends(observer)
        with leases.Heartbeat(lease):
            time.sleep(1.2)  # at least one beat: the beater connected
            beaters = _backends(observer) - before
            assert len(beaters) == 1, beaters
        deadline = time.monotonic() + 3
        while beaters & _backends(observer) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not beaters & _backends(observer)
    assert leases._beater().thread.is_alive()
