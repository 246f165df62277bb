"""The children gate: a step starts child executions and waits for them without a worker.

``@flow.children(name, label=…)`` declares the step (``executions.authoring.children``).
On its first visit the runner parks the parent here (``executions.engine.parking``):
in that one fenced transaction every declared child is created (pending, dispatched
after commit) under (parent, step, key) — unique in the record
(``one_child_per_parent_step_key``), so a crash before the commit starts none and one
after it finds them all — and the parent moves to ``waiting``. Bad children (an
unknown workflow, an input it refuses) are found before anything is written: the
step needs attention with the refusal as evidence, as the API would have answered
(422 naming the field).

A child that becomes terminal wakes its parent once its transaction commits
(``lifecycle.on_terminal``): the parent wakes when every child is terminal, or as soon
as one failed or was cancelled. The sweeper's pass over this gate (``sweep``) is the
safety net for a wake lost with its worker. Back at the step: all completed → the
step's output, each child's by key; one failed or cancelled → needs_attention
``child_failed`` naming every such child and what leads on (``way_forward``): an
operator restarts a failed child (``triage.restart``; the parent is resumed with it and
waits for the restart, ``services.parent_follow_restart``), or cancels the parent — the
only act left by a cancelled (or rejected) child. A cancel cascades to every live child
(``executions.services.cancel_locked``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from access import viewer

from . import rollouts
from .authoring import registry
from .authoring.children import Child, StartChildren
from .authoring.step_context import StepContext
from .authoring.workflow import Step, Workflow
from .engine import dispatch, failpoints, gates, lifecycle, starting
from .errors import InvalidInput, NeedsAttention
from .models import TERMINAL, Execution, Status
from .reasons import StuckReason

log = logging.getLogger(__name__)

SWEEP_BATCH = 200
BROKEN = (Status.FAILED, Status.CANCELLED)


def gate_ref(execution: Execution, step: str) -> str:
    return f"children:{execution.pk}:{step}"


# --- the family, read: each child as it stands now (a failed child restarted: its restart)


def _latest(child: Execution) -> Execution:
    """``child``, or the restart that continues it (and so on), as the parent sees it."""
    seen = child
    while True:
        following = seen.restart
        if following is None:
            return seen
        seen = following


@viewer.as_runtime
def children_of(parent: Execution, step: str | None = None) -> list[Execution]:
    """The children ``parent`` started (at ``step``), oldest first, each as it stands
    now: a failed child that an operator restarted is represented by its restart
    (carrying the original's ``child_key`` and ``parent_step``)."""
    rows = Execution.objects.filter(parent=parent)
    if step is not None:
        rows = rows.filter(parent_step=step)
    found = []
    for child in rows.order_by("pk"):
        latest = _latest(child) if child.status == Status.FAILED else child
        if latest is not child:
            latest.child_key, latest.parent_step, latest.original = child.child_key, child.parent_step, child
        found.append(latest)
    return found


@viewer.as_runtime
def parent_of(execution: Execution) -> Execution | None:
    """The parent ``execution`` belongs to: its own, or that of the child it restarts."""
    seen = execution
    for _ in range(100):  # a restart chain is short; never loop on a bad record
        if seen.parent_id:
            return Execution.objects.filter(pk=seen.parent_id).first()
        if not seen.restarted_from_id:
            return None
        seen = Execution.objects.get(pk=seen.restarted_from_id)
    return None


def output_of(child: Execution) -> dict[str, Any]:
    """What the parent's step reads of a completed child."""
    context = child.context or {}
    return {
        "id": child.ref,
        "workflow": child.workflow,
        "status": child.status,
        "state": child.outputs(),
        "result": context.get("result") if child.status == Status.COMPLETED else None,
        "artifacts": context.get("artifacts", {}),
        "facts": (context.get("notes") or {}).get("facts", []),
    }


def broken_sentence(child: Execution) -> str:
    """What happened to a failed or cancelled child and the one act that leads on from it:
    a failed child is restarted from the step it failed at (its parent then follows the
    restart by itself, ``follow_restart``); a cancelled one can't be restarted, so only
    cancelling the parent leads on."""
    why = f": {child.status_reason}" if child.status_reason else ""
    named = f"child {child.ref} ({child.workflow}, key {child.child_key})"
    if child.status == Status.FAILED:
        at = child.current_step or "the step it failed at"
        return (
            f"{named} failed at {at}{why} — restart it from {at} (POST /api/executions/{child.ref}/restart, or "
            "its page): this execution then waits for the restart by itself"
        )
    return f"{named} was {child.status}{why} — a {child.status} execution can't be restarted: cancel this execution"


@dataclass(frozen=True)
class WayForward:
    """What leads a parent stopped by its children (``child_failed``) on: ``action`` of
    the stuck vocabulary (``restart``: restart each failed child; ``cancel``: a child
    was cancelled, nothing else leads on; ``resume``: every broken child was restarted),
    the sentence naming every broken child, and the children to act on."""

    action: str
    detail: str
    children: tuple[str, ...]


def way_forward(parent: Execution, step: str | None = None) -> WayForward:
    """For ``parent`` at its children step (``step``, else its current one), as its
    children stand now — never the sentence recorded when it stopped: a child may have
    failed, or been restarted, since."""
    step = step or parent.current_step
    children = children_of(parent, step) if step else []
    broken = [c for c in children if c.status in BROKEN]
    if not broken:
        restarted = [c for c in children if getattr(c, "original", None) is not None]
        named = ", ".join(f"{c.original.ref} as {c.ref}" for c in restarted) or "none"
        return WayForward(
            "resume", f"every child that failed was restarted ({named}): resume it to wait for the restarts", ()
        )
    cancelled = any(c.status != Status.FAILED for c in broken)
    detail = f"{len(broken)} of {len(children)} children can't complete: " + "; ".join(
        broken_sentence(c) for c in broken
    )
    if cancelled:
        return WayForward("cancel", detail, (parent.ref,))
    return WayForward("restart", detail, tuple(c.ref for c in broken))


# --- the declared children, checked before anything is written


def declared(execution: Execution, workflow: Workflow, step: Step) -> list[tuple[Child, Workflow, dict]]:
    """(child, the version of its workflow it runs, its parsed input) for every child the step
    declares. Raises NeedsAttention (step_error) with the refusal as evidence: a bad
    key, an unknown workflow or an input it refuses (the 422 an API start would give)."""
    spec = step.spec
    assert isinstance(spec, StartChildren), "the children gate runs only the steps that start children"
    children = list(spec.start(StepContext(execution=execution, workflow=workflow)) or [])
    found: list[tuple[Child, Workflow, dict]] = []
    keys: set[str] = set()
    for child in children:
        seed = f"child:{execution.pk}:{child.key}"  # its version: the rollout's choice, by the parent and the key
        refusal, flow, parsed = _checked(child, keys, seed)
        if refusal is not None:
            raise NeedsAttention(
                f"can't start child {child.key or '?'} ({child.workflow}): {refusal['detail']}",
                code=StuckReason.STEP_ERROR,
                evidence={"child": {"key": child.key, "workflow": child.workflow}, "refused": refusal},
            )
        assert flow is not None
        found.append((child, flow, parsed))
        keys.add(child.key)
    return found


def _checked(child: Child, keys: set[str], seed: str) -> tuple[dict[str, Any] | None, Workflow | None, Any]:
    """(refusal, None, None) for a child that can't start; else (None, the version it runs, its parsed input)."""
    problem = child.problem() or (f"the key {child.key} is used twice in this step" if child.key in keys else "")
    if problem:
        return {"status": 422, "detail": problem, "field": "key"}, None, None
    try:
        flow = rollouts.choose(child.workflow, seed=seed)  # the version it would run (executions.rollouts)
    except registry.UnknownWorkflow as exc:
        return {"status": 422, "detail": f"workflow: {exc}", "field": "workflow"}, None, None
    assert flow.parse_input is not None, "Workflow.__post_init__ sets it"
    try:
        return None, flow, flow.parse_input(child.input)
    except InvalidInput as exc:
        return {"status": 422, "detail": exc.message, "field": exc.field}, None, None


# --- waking the parent


@viewer.as_runtime
def wake_parent_of(execution_id: int) -> None:
    """After the commit that made ``execution_id`` terminal: wake its parent if it waits
    for it and now may go on. Never raises (the sweeper is the safety net)."""
    try:
        failpoints.hit("before_parent_wake")
        child = Execution.objects.filter(pk=execution_id).first()
        parent = parent_of(child) if child is not None else None
        if parent is not None and parent.status == Status.WAITING and _ready(parent):
            wake_if_ready(parent.pk, actor_label=f"child:{child.ref}")
    except Exception:
        log.exception("could not wake the parent of execution %s; the sweeper will", execution_id)


def _ready(parent: Execution) -> bool:
    """May ``parent`` go on: every child at its step terminal, or one failed or cancelled?
    Read without a lock: a child that isn't the last costs its parent no write."""
    children = children_of(parent, parent.current_step)
    if not children:
        return False
    return any(c.status in BROKEN for c in children) or all(c.status in TERMINAL for c in children)


@viewer.as_runtime
def wake_if_ready(parent_id: int, *, actor_label: str) -> bool:
    """Wake parent ``parent_id`` (one transition, one message) if it waits at a children
    step whose children are all terminal, or one failed or was cancelled."""
    with transaction.atomic():
        parent = Execution.objects.select_for_update(no_key=True).filter(pk=parent_id).first()
        if parent is None or parent.status != Status.WAITING:
            return False
        if not _ready(parent):  # read again under the lock: two last children may race here
            return False
        children = children_of(parent, parent.current_step)
        lifecycle.apply(
            parent,
            "wake",
            actor_label=actor_label,
            payload={"children": {c.child_key: {"id": c.ref, "status": c.status} for c in children}},
        )
        dispatch.dispatch_on_commit(parent.pk)
    return True


lifecycle.on_terminal(wake_parent_of)


class ChildrenGate(gates.Gate):
    kind = StartChildren.kind

    def visit(self, execution: Execution, step: Step):
        children = children_of(execution, step.name)
        if not children:
            # Nothing started yet: check what the step declares before the gate opens;
            # a step that declares none has nothing to wait for and passes at once.
            if not declared(execution, registry.get(execution.workflow, execution.workflow_version), step):
                return gates.Passed({})
            return None
        broken = [c for c in children if c.status in BROKEN]
        if broken:
            return gates.Attention(reason=way_forward(execution, step.name).detail, code=StuckReason.CHILD_FAILED)
        if any(c.status not in TERMINAL for c in children):
            return None  # woken early (a restarted child still runs): wait again
        return gates.Passed({c.child_key: output_of(c) for c in children})

    def open(self, execution: Execution, step: Step, workflow: Workflow, *, actor_label: str) -> gates.Opened:
        existing = dict(
            Execution.objects.filter(parent=execution, parent_step=step.name).values_list("child_key", "pk")
        )
        started = {}
        for child, flow, parsed in declared(execution, workflow, step):
            if child.key in existing:
                continue
            made = starting.create(
                flow,
                parsed,
                created_by_id=execution.created_by_id,
                actor_label=f"parent:{execution.ref}",
                parent=execution,
                parent_step=step.name,
                child_key=child.key,
            )
            started[child.key] = made.ref
        return gates.Opened(
            transition="wait",
            ref=gate_ref(execution, step.name),
            event="children.started" if started else "children.waiting",
            payload={"started": started, "already_started": sorted(existing)},
        )

    def sweep(self) -> list[int]:
        """Parents waiting at a children step that may go on but weren't woken (the
        worker that finished the last child died before it could)."""
        at_step = Execution.objects.filter(parent=OuterRef("pk"), parent_step=OuterRef("current_step"))
        ready = (
            Q(status=Status.WAITING)
            & Exists(at_step)
            & (~Exists(at_step.exclude(status__in=TERMINAL)) | Exists(at_step.filter(status__in=BROKEN)))
        )
        woken = []
        for parent in Execution.objects.filter(ready).order_by()[:SWEEP_BATCH]:
            # Read first without a lock: a parent whose failed child was restarted and still
            # runs matches the query at every sweep, and must cost no write.
            if _ready(parent) and wake_if_ready(parent.pk, actor_label="sweeper"):
                woken.append(parent.pk)
        return woken

    def holding(self) -> Q:
        return Q(Exists(Execution.objects.filter(parent=OuterRef("pk"), parent_step=OuterRef("current_step"))))

    def pending(self, execution: Execution) -> gates.PendingGate | None:
        found = self.pending_many([execution])
        return found.get(execution.pk)

    def pending_many(self, executions: list[Execution]) -> dict[int, gates.PendingGate]:
        waiting = {e.pk: e for e in executions if e.status == Status.WAITING}
        if not waiting:
            return {}
        found: dict[int, gates.PendingGate] = {}
        for parent in waiting.values():
            children = children_of(parent, parent.current_step)
            if not children:
                continue
            done = sum(1 for c in children if c.status in TERMINAL)
            found[parent.pk] = gates.PendingGate(
                kind=self.kind,
                step=parent.current_step,
                ref=gate_ref(parent, parent.current_step),
                waiting_for=f"{len(children) - done} of {len(children)} child executions: "
                + ", ".join(f"{c.ref} ({c.workflow}, {c.status})" for c in children),
                since=parent.status_changed_at,
                until=None,
                details={"children": [{"id": c.ref, "key": c.child_key, "status": c.status} for c in children]},
            )
        return found


def live_children(parent: Execution) -> list[Execution]:
    """Every child of ``parent`` (at any step) not yet terminal, as it stands now."""
    return [c for c in children_of(parent) if c.status not in TERMINAL]


gates.register(ChildrenGate())
