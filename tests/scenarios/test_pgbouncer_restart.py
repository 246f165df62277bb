"""Issue 24, S47: PgBouncer (transaction mode, every process of the stack through it)
SIGKILLed and started again on its port mid-run, twice → 0 lost, 0 duplicate effects,
0 stuck."""

from __future__ import annotations

import pytest

from executions.models import Execution
from tests.support.procs import PgBouncer
from tests.support.stack import Stack, wait_status


@pytest.fixture
def bouncer(tmp_path):
    """A PgBouncer of this test's own: it is killed mid-run."""
    pooler = PgBouncer(tmp_path)
    pooler.start()
    yield pooler
    pooler.close()


@pytest.fixture
def stack(request, transactional_db, sandbox, shared_stacks, tmp_path, bouncer):
    shared_stacks.close()
    own = Stack(tmp_path, sandbox, pooler=bouncer)
    yield own
    own.close()
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        print(own.logs())


@pytest.mark.own_stack
def test_s47_pgbouncer_restarted_mid_run_nothing_lost_duplicated_or_stuck(stack, bouncer, people, api_as):
    """S47: PgBouncer SIGKILLed and started again on its port twice while executions run
    (every client and server connection dropped mid-transaction) → every execution
    completes, every effect once, nothing stuck."""
    stack.up(workers=2)
    requester, manager, operator = (api_as(people[p]) for p in ("requester", "manager", "operator"))
    refs = [requester.start(month)["id"] for month in ("2026-02", "2026-03", "2026-04", "2026-05")]
    bouncer.restart(down_seconds=0.5)  # while the first steps run
    approvals = {ref: wait_status(requester, ref, "awaiting_approval", timeout=60)["pending_approval"] for ref in refs}
    for ref, approval in approvals.items():
        assert manager.decide(ref, approval).status_code == 202
    bouncer.restart(down_seconds=0.5)  # while the effects go out
    for ref in refs:
        wait_status(requester, ref, "completed", timeout=60)
    keys = stack.sandbox_stats()["keys"]
    assert all(v.get("effects", 0) <= 1 for v in keys.values()), keys
    published = [k for k in keys if k.endswith(":publish:v1") and keys[k].get("effects") == 1]
    assert len(published) == len(refs), keys
    assert Execution.objects.filter(status="completed").count() == len(refs)
    summary = operator.get("/executions/summary").json()
    assert not any(summary["by_reason"].values()), summary["by_reason"]
