"""Parking an execution at a gate: the one routine that opens a gate and lets the worker go.

A gate step (the runner) and a tool that needs an approval (an agent step) both park
here. One fenced transaction: the execution, read again, must still run; the
caller's own writes that belong with it run first (``prepare``: an agent's results so
far and the artifact version of the arguments to approve); a gate asked again opens
in a new round; the gate opens and records what it asks (``Gate.open``), and its
event is appended; the effects it guards are planned in the ledger under its
reference; its timer (or none: a timer left by an earlier retry is cleared) and SLA are set; the transition parks the execution and the
lease is given back. No worker is held while a person or the outside world takes
its time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from django.db import transaction

from ..models import Execution
from . import ledger, lifecycle
from .leases import Lease, fenced_row, release

if TYPE_CHECKING:
    from ..authoring.workflow import Effect, Step, Workflow
    from .gates import Gate, Opened


def park(
    lease: Lease,
    *,
    gate: Gate,
    step: Step,
    workflow: Workflow,
    reopen: bool,
    effects: Sequence[tuple[Step, Effect]] | Callable[[str], Sequence[tuple[Step, Effect]]] = (),
    prepare: Callable[[Execution], Sequence[str]] | None = None,
    payload: dict[str, Any] | None = None,
) -> Opened:
    """Open ``gate`` at ``step`` and park the execution, under ``lease``; returns what
    the gate opened. ``reopen``: what was asked last lapsed (a new round). ``effects``:
    the (effect step, Effect) pairs the gate guards, planned under its reference — or a
    function of that reference giving them, for effects keyed by what authorises them
    (an agent's approved tool call: ``approval:12`` and the tool).
    ``prepare(execution)`` writes what belongs with the parking and returns the fields it
    changed on ``execution`` for the transition's UPDATE. ``payload``: more for the
    gate's event. Raises LeaseLost, ExecutionStopped (the execution no longer runs)."""
    with transaction.atomic():
        execution = fenced_row(lease, running=True)
        fields = list(prepare(execution)) if prepare is not None else []
        if reopen:  # a fresh ask needs a fresh round
            fields.append(execution.start_round())
        opened = gate.open(execution, step, workflow, actor_label=lease.owner)
        lifecycle.record(
            execution,
            opened.event or "gate.opened",
            step=step.name,
            actor_label=lease.owner,
            payload={**opened.payload, **(payload or {})},
        )
        for effect_step, effect in effects(opened.ref) if callable(effects) else effects:
            ledger.plan(execution, step=effect_step, effect=effect, gate_ref=opened.ref, actor_label=lease.owner)
        # The gate owns the timer it parks with: its own ``due_at``, or none — never what an
        # earlier state left (a retry's due time, read by the sweeper and the claim as a
        # timer that came due, would wake the execution at every sweep); and the SLA past
        # which the triage console calls the gate overdue.
        execution.due_at = opened.due_at
        execution.gate_sla_at = opened.sla_at
        fields += ["due_at", "gate_sla_at"]
        lifecycle.apply(execution, opened.transition, actor_label=lease.owner, step=step.name, update_fields=fields)
        release(lease)
    return opened
