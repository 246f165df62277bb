"""A hold, as the engine sees it (DESIGN §6 Operations): where a worker lets a paused
execution go, and a workflow's kill switch read at each step boundary.

An operator's pause (``executions.holds``) is an unfenced transition: it may land while
a worker is in a step. That worker's step finishes and checkpoints all the same (the
runner's held checkpoint, fenced on its lease and ``paused`` left from ``running``),
then it gives the lease back and nothing after the step runs; no effect starts while
paused, because the ledger commits an action as executing only with the execution
``running`` (``ledger._running``, under the row lock the pause also takes). A kill
switch is read before every step: a running execution of a paused workflow is paused
there by its worker (``runner._pause_at_boundary``: a fenced transition that also gives
the lease back), and a pending
one is never claimed (``leases.acquire``).
"""

from __future__ import annotations

from ..models import WorkflowSwitch


def workflow_paused(workflow: str) -> bool:
    """Whether ``workflow``'s kill switch is thrown now (its latest switch; one indexed row)."""
    latest = WorkflowSwitch.objects.filter(workflow=workflow).order_by("-id").values_list("paused", flat=True).first()
    return bool(latest)


def paused_names() -> list[str]:
    """The workflows whose kill switch is thrown now (the latest switch of each)."""
    latest: dict[str, bool] = {}
    for workflow, paused in WorkflowSwitch.objects.order_by("id").values_list("workflow", "paused"):
        latest[workflow] = paused
    return sorted(name for name, paused in latest.items() if paused)
