"""Advancing an execution: one bounded slice of steps under one lease.

A worker that holds the lease runs the next step directly, without a round trip
through the broker, until the execution waits, stops, or the slice's time is up;
then it gives the lease back and rings again. Every write is fenced by the lease
token. Cost: one commit per compute/model step (checkpoint + step run, one statement
on PostgreSQL: executions.engine.writer), two per effect (ledger row before the call,
result after), one claim per slice.

A worker that loses its database connection mid-slice (a restart, a failover, a
killed backend) is treated as a worker that crashed: it writes nothing more and
returns; its lease lapses and the sweeper dispatches the execution again, to this
worker (which reconnects before its next task) or another. It is never a step's
failure nor a reason to ask a person.
"""

from __future__ import annotations

import logging
import time
import traceback
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Value
from django.db.models.functions import Now
from django.utils import timezone

from artifacts.services import artifact_version_create

from ..authoring import notes as progress_notes
from ..authoring import registry, retry
from ..authoring.http import call_timeout
from ..authoring.step_context import StepContext
from ..authoring.workflow import END, Effect, Step, StepKind, Workflow
from ..errors import FailureKind, NeedsAttention, StepFailure
from ..models import Action, Execution, Status, StepRun, ref_for
from ..reasons import StuckReason
from ..redaction import redact
from ..storable import as_stored
from . import (
    dispatch,
    failpoints,
    gates,
    kinds,
    leases,
    ledger,
    lifecycle,
    logcontext,
    outages,
    parking,
    pauses,
    routing,
    tracing,
    writer,
)
from .leases import ExecutionStopped, Heartbeat, Lease, LeaseLost, Misrouted, acquire, fence, fenced_row, release

log = logging.getLogger(__name__)

CONTINUE, STOP = "continue", "stop"


def advance(execution_id: int, *, worker: str, queues: frozenset[str] | None = None) -> str:
    """Run one slice of execution ``execution_id`` if this worker can take it.

    Returns what happened ("not claimed", "misrouted", "stopped", "sliced", "lease
    lost", "database lost"). Never raises for a lost lease, a stopped execution or a
    database connection lost mid-slice. Given the ``queues`` this worker consumes, a
    step that rings on another queue is not run here: the doorbell rings that queue.
    """
    try:
        lease = acquire(execution_id, owner=worker, queues=queues)
    except Misrouted as misrouted:
        log.info("execution %s: %s; rang it there", execution_id, misrouted)
        dispatch.send(execution_id, queue=misrouted.queue)
        return "misrouted"
    if lease is None:
        return "not claimed"
    with logcontext.slice_of(ref_for(execution_id), lease.token), Heartbeat(lease) as heartbeat:
        try:
            if lease.overran_by:
                return _overran(lease)
            return _run_slice(lease, heartbeat)
        except (LeaseLost, ExecutionStopped) as stop:
            log.info("execution %s: %s", execution_id, stop)
            if isinstance(stop, LeaseLost):
                return "lease lost"
            _let_go_if_paused(lease)
            return "stopped"
        except Exception as exc:  # outside any step: undeployed version, a database error…
            if outages.database_lost(exc):
                log.warning(
                    "execution %s: lost the database mid-slice, nothing more written; "
                    "the lease lapses and the sweeper dispatches it again: %r",
                    execution_id,
                    exc,
                )
                return "database lost"
            log.exception("execution %s: slice failed", execution_id)
            return _flag_outside_step(lease, f"{type(exc).__name__}: {exc}")


def _overran(lease: Lease) -> str:
    """Taken over from a worker whose step ran past its timeout (its heartbeat stopped):
    that attempt failed; the step's retry policy decides what comes next. An action it
    left in flight may have acted: its outcome is unknown (reconciled by the next attempt,
    or a person's when none is left), in the same commit as the failed attempt."""
    execution = Execution.objects.get(pk=lease.execution_id)
    workflow = registry.get(execution.workflow, execution.workflow_version)
    step = workflow.get_step(execution.current_step)
    why = f"ran past its timeout of {workflow.timeout_for(step.name):g} s on {lease.overran_by}"
    with transaction.atomic():
        acting = ledger.lose_in_flight(lease=lease, step=step.name, why=why)
        if acting is None:
            failure = StepFailure(FailureKind.TRANSIENT, why)
        else:
            failure = StepFailure(FailureKind.OUTCOME_UNKNOWN, f"{why}, with {acting.key} in flight: it may have acted")
        _step_failed(lease, step, failure, timezone.now())
    return "stopped"


def _run_slice(lease: Lease, heartbeat: Heartbeat) -> str:
    """Steps one after another on the row the claim read, kept current in memory: under
    our lease only this worker writes it, and every write is fenced (the checkpoint's
    UPDATE is conditional on the token and the step), so nothing is read again."""
    ends = time.monotonic() + settings.RUNTIME_SLICE_SECONDS
    execution = lease.row or Execution.objects.annotate(db_now=Now()).get(pk=lease.execution_id)
    if execution.status != Status.RUNNING or execution.lease_token != lease.token:
        return "stopped"
    logcontext.of_execution(workflow=execution.workflow, trace_id=tracing.trace_id_of(execution))
    if execution.deadline and execution.deadline <= execution.db_now:
        return _stop_at_deadline(lease)
    while True:
        if heartbeat.lost.is_set():
            raise LeaseLost("heartbeat lost the lease")
        if pauses.paused_at_boundary(execution):
            return _pause_at_boundary(lease, execution)
        if not execution.current_step:  # its last step checkpointed under a hold: only the completion is left
            return _complete_after_hold(lease, execution)
        workflow = registry.get(execution.workflow, execution.workflow_version)
        step = workflow.get_step(execution.current_step)
        if _run_step(lease, execution, workflow, step) == STOP:
            return "stopped"
        # The next step belongs on another queue (RUNTIME_QUEUES): ring there, as at a slice's end.
        here, there = routing.queue_for_step(workflow, step), _queue_of_next(workflow, execution)
        if time.monotonic() >= ends or there != here:
            with transaction.atomic():
                fence(lease)
                release(lease)
                dispatch.dispatch_on_commit(lease.execution_id, queue=there)
            return "sliced"


def _queue_of_next(workflow: Workflow, execution: Execution) -> str:
    if not routing.routes():
        return routing.default_queue()
    return routing.queue_for_step(workflow, workflow.get_step(execution.current_step))


def _run_step(lease: Lease, execution: Execution, workflow: Workflow, step: Step) -> str:
    """One visit attempt of ``step``, in its ``keel.step`` span (tracing on)."""
    with tracing.step(execution, step.name, lambda: len(execution.visit_outputs(step.name)) + 1):
        return _attempt(lease, execution, workflow, step)


def _attempt(lease: Lease, execution: Execution, workflow: Workflow, step: Step) -> str:
    logcontext.at_step(step.name)
    failpoints.hit(f"before_step:{step.name}")
    started = timezone.now()
    ctx = StepContext(execution=execution, workflow=workflow)
    try:
        _visit_limit(execution, workflow, step)
        if step.is_gate:
            return _gate(lease, execution, workflow, step, started)
        if step.kind == StepKind.EFFECT:
            return _effect(lease, ctx, workflow, step, started)
        if step.kind == StepKind.COMPUTE:
            assert step.fn is not None, "a compute step declares its function"
            output = step.fn(ctx)
            output = {} if output is None else output  # nothing returned; 0, "" and [] are outputs too
        elif step.kind == StepKind.BRANCH:
            output = _branch(ctx, step)
        else:  # a kind that plugs in (model, agent: executions.agent)
            outcome = kinds.get(step.kind).run(lease, ctx, workflow, step)
            if isinstance(outcome, kinds.Parked):
                tracing.outcome("parked")
                return STOP
            output = outcome.output
        output = _as_stored(step, output)
    except StepFailure as failure:
        return _step_failed(lease, step, failure, started, ctx=ctx)
    except NeedsAttention as stop:  # model drift, a spent budget: a person decides
        return _needs_attention(lease, step, stop, started)
    except (LeaseLost, ExecutionStopped):
        raise
    except Exception as exc:  # a bug in step code: keep the evidence, ask a person
        if outages.database_lost(exc):
            raise  # not the step's doing: the slice ends there (advance)
        log.exception("step %s of %s raised", step.name, execution.ref)
        crash = StepFailure(
            FailureKind.TRANSIENT, f"{type(exc).__name__}: {exc}", evidence=traceback.format_exc(limit=5)
        )
        return _step_failed(lease, step, crash, started, unexpected=True)
    return _checkpoint(lease, ctx, workflow, step, output, started)


def _as_stored(step: Step, output: Any) -> Any:
    """``output`` as the database keeps it and a resumed visit reads it back (JSON: dates in
    ISO 8601, decimals as text, tuples as lists, keys as text; ``storable.jsonable``), so
    the steps after it see the same value in this slice as after a crash. TypeError naming
    the step when it can't be stored (a bug in the step's code: a person looks)."""
    return as_stored(output, f"{step.name}'s output")


def _branch(ctx: StepContext, step: Step) -> dict[str, Any]:
    """A branch's choice as its output; an undeclared answer needs a person (NeedsAttention
    naming it and the declared ones: the code, not the world, is wrong)."""
    assert step.fn is not None, "a branch declares its function"
    chosen = step.fn(ctx)
    if chosen != END and chosen not in step.to:
        declared = ", ".join(step.to)
        raise NeedsAttention(f"chose {chosen!r}, which is not one of its steps ({declared}, or END)")
    return {"next": chosen}


def _checkpoint(
    lease: Lease,
    ctx: StepContext,
    workflow: Workflow,
    step: Step,
    output: dict[str, Any],
    started,
    *,
    action: Action | None = None,
) -> str:
    """One commit: the checkpoint (state, progress notes, next step) in one fenced UPDATE,
    the step run, and for an effect its ledger result; artifacts first, under a fence.

    If the execution stopped running meanwhile (cancelled while an effect's call was
    in flight), nothing is checkpointed, but the effect's receipt is still recorded.
    """
    execution = ctx.execution
    try:
        following = workflow.next_step(step.name, output)
        if not ctx.staged_artifacts and action is None and not _loops_back(execution, following, current=step.name):
            _finish_in_one(lease, execution, ctx, workflow, step, output, started, following)
        else:
            with transaction.atomic():
                if ctx.staged_artifacts or action is not None:  # prove the lease before writing anything
                    leases.checkpoint(lease, step.name)
                following = _commit_step(lease, execution, ctx, workflow, step, output, started, action)
    except leases.Fenced:
        current = leases.diagnose(lease)  # LeaseLost if it isn't ours any more
        if current.status == Status.PAUSED and current.paused_from == Status.RUNNING:
            _checkpoint_held(lease, ctx, workflow, step, output, started, action)
            raise ExecutionStopped(f"{current.ref} was paused at {step.name}: checkpointed, let go") from None
        if action is not None:
            with transaction.atomic():
                fence(lease)
                ledger.mark_succeeded(action, output, execution=current, actor_label=lease.owner)
        raise ExecutionStopped(f"{current.ref} is {current.status}, no longer at {step.name}") from None
    log.info("%s: %s done (%s)%s", execution.ref, step.name, step.kind, "" if following else "; completed")
    failpoints.hit(f"after_step:{step.name}")
    return CONTINUE if following else STOP


def _loops_back(execution: Execution, following: str, *, current: str) -> bool:
    """``following`` already completed in this round (or it is the step just done): the
    edge leads back (a loop), and its next visit starts a new round (its own step runs,
    model calls, approval, wait). Asked of the database only for a step completed before
    (in memory: its output)."""
    if following and following == current:
        return True
    if not following or following not in execution.outputs():
        return False
    return StepRun.objects.filter(
        execution_id=execution.pk, step=following, round=execution.round, outcome=StepRun.Outcome.SUCCEEDED
    ).exists()


def _visit_limit(execution: Execution, workflow: Workflow, step: Step) -> None:
    """About to enter ``step`` once more than ``Workflow.max_visits``: NeedsAttention
    (``loop_limit``) before anything is called. Counted only for a step visited before."""
    if step.name not in execution.outputs():
        return
    if len(execution.visit_outputs(step.name)) >= workflow.max_visits:
        raise NeedsAttention(
            f"{step.name} was visited {workflow.max_visits} times, the most {workflow.name} allows (max_visits): "
            "nothing was called for another visit",
            code=StuckReason.LOOP_LIMIT,
        )


def _note_step(state: dict[str, Any], ctx: StepContext, workflow: Workflow, step: Step, output: dict) -> str:
    """The step's output (``Execution.outputs``: stored in its step run, not in the context)
    and progress notes into ``state`` (in memory); the next step ("" at the end)."""
    ctx.execution.outputs()[step.name] = output
    notes = state["notes"]
    # Each fact remembers the step that verified it and its visit's round, so a restart keeps
    # only the facts of the visits it reuses (triage.restart) and a replay of an earlier
    # visit leaves out what later ones verified (triage.replay).
    verified = [{"step": step.name, "round": ctx.execution.round, **f} for f in ctx.new_facts]
    notes["facts"] = progress_notes.merge_facts(notes["facts"], verified)
    notes["hypotheses"] = progress_notes.merge_hypotheses(notes.get("hypotheses", []), ctx.new_hypotheses)
    notes["completed_steps"].append(step.name)
    following = workflow.next_step(step.name, output)  # a route's output names the step it chose
    notes["next_action"] = workflow.label_for(following) if following else "done"
    if not following:
        state["result"] = _result(ctx, workflow, output)
    return following


def _result(ctx: StepContext, workflow: Workflow, output: dict[str, Any]) -> Any:
    """What the completed execution produced (``Workflow.result``, else its last step's
    output), redacted and storable; raises TypeError naming the workflow when it isn't JSON."""
    value = workflow.result(ctx) if workflow.result is not None else output
    return redact(as_stored(value, f"the result of {workflow.name} v{workflow.version}"))


def _finish_in_one(lease, execution, ctx, workflow, step, output, started, following) -> None:
    """A step with no artifact and no effect: its checkpoint (or, for the last step, the
    completion) and its step run in one statement (executions.engine.writer). Raises Fenced
    if refused."""
    _note_step(execution.context, ctx, workflow, step, output)
    attempt = execution.failed_attempts + 1
    if not following:
        _complete(lease, execution, step, output, started, attempt)
        return
    written, switch_thrown = writer.checkpoint_step(
        execution=execution,
        where=leases.fence_conditions(lease, step.name),
        following=following,
        step_deadline=leases.in_seconds(workflow.timeout_for(following)),
        run=_run_of(lease, execution, step, started, StepRun.Outcome.SUCCEEDED, output=output, attempt=attempt),
        now=timezone.now(),
        probe=(pauses.SWITCH_SQL, [execution.workflow]),  # read for the next boundary (pauses.paused_at_boundary)
    )
    if not written:
        raise leases.Fenced(f"execution {lease.execution_id} is not running at {step.name} under token {lease.token}")
    execution.failed_attempts, execution.current_step = 0, following
    execution.switch_thrown = switch_thrown


def _complete(lease, execution, step, output, started, attempt) -> None:
    """The last step done: the ``complete`` transition with the checkpoint and the lease
    given back, fenced, with the step's run (written first, so the timeline reads it
    before the completion). Raises Fenced if the lease is gone or the execution moved on."""
    run = _run_of(lease, execution, step, started, StepRun.Outcome.SUCCEEDED, output=output, attempt=attempt)
    execution.current_step, execution.step_deadline, execution.failed_attempts = "", None, 0
    lifecycle.apply(
        execution,
        "complete",
        actor_label=lease.owner,
        update_fields=("context", "current_step", "failed_attempts", "step_deadline", *leases.given_back(execution)),
        where=leases.fence_conditions(lease, step.name),
        payload={"step": step.name},
        with_rows=(run,),
    )


def _commit_step(lease, execution, ctx, workflow, step, output, started, action, *, held: bool = False) -> str:
    """Inside the transaction: record the step and move to the next. Returns it ("" at the end).

    The first write is the fenced one (the checkpoint, or the completion with the lease
    given back), so a worker that lost its lease writes nothing. Step completion is
    recorded once, as the step run (the timeline reads step runs with the events).
    """
    state = execution.context
    for staged in ctx.staged_artifacts:
        version = artifact_version_create(
            execution=execution,
            kind=staged.kind,
            title=staged.title,
            blob=staged.blob,
            content_type=staged.content_type,
            step=step.name,
            round=execution.round,
        )
        state.setdefault("artifacts", {})[staged.name] = version.as_ref()
        gates.new_version(version, actor_label=lease.owner)
    following = _note_step(state, ctx, workflow, step, output)
    attempt = execution.failed_attempts + 1
    if action is not None:  # the effect's receipt before the step's checkpoint (it was fenced above)
        ledger.mark_succeeded(action, output, execution=execution, actor_label=lease.owner)
    execution.context = state
    execution.failed_attempts = 0
    if following or held:  # held: the last step's checkpoint waits for the resume to complete
        deadline = leases.step_deadline(execution, following) if following else None
        loop = _loops_back(execution, following, current=step.name)
        leases.checkpoint(
            lease,
            step.name,
            status=Status.PAUSED if held else Status.RUNNING,
            context=state,
            current_step=following,
            failed_attempts=0,
            step_deadline=deadline,
            updated_at=timezone.now(),
            **({"round": execution.round + 1} if loop else {}),  # the next visit, a round of its own
        )
        execution.current_step = following
        _record_run(lease, execution, step, started, StepRun.Outcome.SUCCEEDED, output=output, attempt=attempt)
        if loop:
            execution.start_round()
            # What this visit planned and never sent won't be: the next visit plans (and asks) anew.
            why = f"the workflow went back to {following} (round {execution.round}) before it ran"
            ledger.abandon_unstarted(execution, actor_label=lease.owner, reason=why)
    else:
        _complete(lease, execution, step, output, started, attempt)
    return following


def _checkpoint_held(lease, ctx, workflow, step, output, started, action) -> None:
    """Paused while this step ran (docs/design.md §6 Operations): the step checkpoints all the
    same — fenced on our lease, the step, and ``paused`` left from ``running`` — from the
    context as it was before the step (the refused write changed only our copy); then the
    lease is given back. Nothing after the step runs; resume goes on from the next one."""
    execution = ctx.execution
    with transaction.atomic():
        row = fenced_row(lease)
        if row.status == Status.PAUSED and row.paused_from == Status.RUNNING and row.current_step == step.name:
            execution.context, execution.failed_attempts = row.context, row.failed_attempts
            _commit_step(lease, execution, ctx, workflow, step, output, started, action, held=True)
        release(lease)
    log.info("%s: paused while %s ran; checkpointed it and let go", execution.ref, step.name)


def _pause_at_boundary(lease: Lease, execution: Execution) -> str:
    """Its workflow's kill switch is thrown: pause here, between steps, with the lease given
    back (one fenced write). Fenced: the execution moved on meanwhile; nothing written."""
    execution.paused_by_workflow = True
    try:
        lifecycle.apply(
            execution,
            "pause",
            actor_label=lease.owner,
            reason=f"workflow {execution.workflow} is paused",
            code=StuckReason.PAUSED,
            payload={"by": "workflow"},
            update_fields=("paused_from", "paused_by_workflow", *leases.given_back(execution)),
            where=leases.fence_conditions(lease, execution.current_step),
        )
    except leases.Fenced:
        leases.diagnose(lease)
        _let_go_if_paused(lease)
    log.info("%s: its workflow is paused; paused before %s", execution.ref, execution.current_step)
    return "stopped"


def _complete_after_hold(lease: Lease, execution: Execution) -> str:
    """Resumed after a hold that landed on its last step (``_checkpoint_held``): complete."""
    lifecycle.apply(
        execution,
        "complete",
        actor_label=lease.owner,
        update_fields=("step_deadline", *leases.given_back(execution)),
        where=leases.fence_conditions(lease, ""),
    )
    return "stopped"


def _let_go_if_paused(lease: Lease) -> None:
    """After the slice stopped: a paused execution's lease goes back now, so its resume is
    taken at once (not after the lease lapses). A lost lease: nothing to give back."""
    with transaction.atomic():
        if Execution.objects.filter(pk=lease.execution_id, lease_token=lease.token, status=Status.PAUSED).exists():
            release(lease)


def _gate(lease: Lease, execution: Execution, workflow: Workflow, step: Step, started) -> str:
    """Ask the step's gate. First visit (or what was asked lapsed): it opens, the
    execution parks without a worker. Coming back: its outcome is the step's output,
    or a person must look."""
    assert step.spec is not None, "a gate step declares its spec"
    gate = gates.get(step.spec.kind)
    outcome = gate.visit(execution, step)
    if isinstance(outcome, gates.Passed):
        tracing.event("gate.passed", **{"keel.gate": gate.kind})
        ctx = StepContext(execution=execution, workflow=workflow)
        return _checkpoint(lease, ctx, workflow, step, outcome.output, started)
    if isinstance(outcome, gates.Attention):
        _flag_outside_step(lease, outcome.reason, code=outcome.code)
        return STOP
    planned = _plan_guarded_effects(execution, workflow, step)
    opened = parking.park(
        lease, gate=gate, step=step, workflow=workflow, reopen=isinstance(outcome, gates.Reopen), effects=planned
    )
    log.info("%s: %s opened at %s (%s)", execution.ref, gate.kind, step.name, opened.ref)
    tracing.event("gate.opened", **{"keel.gate": gate.kind, "keel.gate.ref": opened.ref})
    tracing.outcome("waiting")
    failpoints.hit(f"after_step:{step.name}")
    return STOP


def _plan_guarded_effects(execution: Execution, workflow: Workflow, gate: Step) -> list[tuple[Step, Any]]:
    """The effects this gate guards, described now so the ledger shows them as planned."""
    ctx = StepContext(execution=execution, workflow=workflow)
    planned = []
    for effect_step in workflow.steps:
        if effect_step.kind == StepKind.EFFECT and effect_step.guarded_by == gate.name:
            try:
                assert effect_step.fn is not None, "an effect step declares its function"
                effect = effect_step.fn(ctx)
            except Exception:  # describing it early is a courtesy; the step itself decides later
                log.exception("%s: could not plan %s", execution.ref, effect_step.name)
                continue
            if effect is not None:  # None: it decides, when it runs, not to act
                planned.append((effect_step, effect))
    return planned


# An effect step whose function returns None acts on nothing: no ledger action, this output.
SKIPPED = {"skipped": True}


def _effect(lease: Lease, ctx: StepContext, workflow: Workflow, step: Step, started) -> str:
    assert step.fn is not None, "an effect step declares its function"
    effect = step.fn(ctx)
    if effect is None:
        log.info("%s: %s decided not to act", ctx.execution.ref, step.name)
        return _checkpoint(lease, ctx, workflow, step, dict(SKIPPED), started)
    if not isinstance(effect, Effect):
        raise TypeError(f"{step.name} returned {type(effect).__name__}: an effect step returns an Effect, or None")
    grant = ""
    if step.guarded_by:
        gate_step = workflow.get_step(step.guarded_by)
        assert gate_step.spec is not None, "guarded_by names a gate step (checked when declared)"
        gate = gates.get(gate_step.spec.kind)
        gate.check_effect(ctx.execution, workflow, gate_step, effect)
        grant = gate.grant_ref(ctx.execution, gate_step)
    with call_timeout(step.retry.timeout):
        action, receipt = ledger.perform(
            lease=lease, step=step.name, action_type=step.action, effect=effect, gate_ref=grant
        )
    return _checkpoint(lease, ctx, workflow, step, receipt, started, action=action)


def _step_failed(
    lease: Lease,
    step: Step,
    failure: StepFailure,
    started,
    *,
    unexpected: bool = False,
    ctx: StepContext | None = None,
) -> str:
    """One commit: the failed attempt, then retry later, stop, or ask a person (retry policy).

    A retry is ``retry_pending`` with a due time (database clock) that the sweeper
    honours; no worker sleeps and no long Celery countdown is used. An effect with
    ``on_failure`` that would end the execution ``failed`` goes on at that step instead
    (its output ``{"failed": …}``, checkpointed in the same commit; ``ctx``: the slice's).
    """
    with transaction.atomic():
        execution = fenced_row(lease, running=True, db_now=True)
        attempt = _record_run(
            lease,
            execution,
            step,
            started,
            StepRun.Outcome.FAILED,
            output={"evidence": failure.evidence} if failure.evidence is not None else {},
            error=f"{failure.kind}: {failure.message}",
        )
        if unexpected:
            verdict = retry.Ruling(retry.Verdict.ATTENTION, reason="unexpected error in step code")
        else:
            first = StepRun.objects.filter(execution=execution, step=step.name, round=execution.round).order_by("id")[0]
            verdict = retry.decide(
                step.retry,
                kind=failure.kind,
                attempt=attempt,
                elapsed_seconds=(execution.db_now - first.started_at).total_seconds(),
                retry_after=failure.retry_after,
                seconds_to_deadline=(execution.deadline - execution.db_now).total_seconds()
                if execution.deadline
                else None,
            )
        goes_on = verdict.verdict == retry.Verdict.FAIL and _goes_on(step, failure, ctx, unexpected=unexpected)
        if goes_on:
            assert ctx is not None, "(_goes_on)"
            ctx.staged_artifacts.clear()  # what the failed attempt staged is not the step's outcome
            ctx.new_facts.clear()
            ctx.new_hypotheses.clear()
            went = {"failed": {"kind": str(failure.kind), "error": failure.message, "attempt": attempt}}
            following = _commit_step(lease, ctx.execution, ctx, ctx.workflow, step, went, started, None)
        else:
            _stop_or_retry(lease, execution, step, failure, verdict, attempt, unexpected=unexpected)
    if goes_on:
        log.warning(
            "%s: %s failed for good (%s); on to %s", execution.ref, step.name, failure.kind, following or "the end"
        )
        failpoints.hit(f"after_step:{step.name}")
        return CONTINUE if following else STOP
    log.warning("%s: %s failed (%s): %s", execution.ref, step.name, failure.kind, verdict.reason)
    return STOP


# The provider said no: nothing happened there.
_REFUSED = frozenset({FailureKind.INVALID_INPUT, FailureKind.BUSINESS_REJECTION})
# Retries ran out: nothing happened only where the provider de-duplicates on the key (a 5xx
# after a POST may have acted at one that doesn't: the ledger's may_repeat).
_RAN_OUT = frozenset({FailureKind.TRANSIENT, FailureKind.RATE_LIMITED})


def _goes_on(step: Step, failure: StepFailure, ctx: StepContext | None, *, unexpected: bool) -> bool:
    """An effect that declares ``on_failure`` (run in a slice: ``ctx``) and surely did not
    act: refused by the provider, or its retries ran out at a provider that honours keys.
    Never an unknown outcome, a permission refusal or a bug in step code: a person looks."""
    if not step.on_failure or ctx is None or unexpected:
        return False
    if failure.kind in _REFUSED:
        return True
    if failure.kind not in _RAN_OUT:
        return False
    latest = Action.objects.filter(execution_id=ctx.execution.pk, step=step.name).order_by("-id").first()
    return latest is not None and latest.honors_key


def _stop_or_retry(
    lease: Lease, execution: Execution, step: Step, failure: StepFailure, verdict, attempt: int, *, unexpected: bool
) -> None:
    """Inside the commit: retry later, stop (failed), or ask a person, as ``verdict`` says."""
    execution.failed_attempts = F("failed_attempts") + 1
    payload = {
        "failure": str(failure.kind),
        "attempt": attempt,
        "error": failure.message,
        "verdict": verdict.reason,
    }
    if verdict.verdict == retry.Verdict.RETRY:
        execution.due_at = ExpressionWrapper(
            Now() + Value(timedelta(seconds=verdict.delay_seconds)), output_field=DateTimeField()
        )
        payload.update(delay_seconds=round(verdict.delay_seconds, 3), retry_after=failure.retry_after)
        lifecycle.apply(
            execution,
            "schedule_retry",
            actor_label=lease.owner,
            reason=f"{failure.message}; {verdict.reason}",
            code=StuckReason.RATE_LIMITED if failure.kind == FailureKind.RATE_LIMITED else StuckReason.RETRYING,
            step=step.name,
            payload=payload,
            update_fields=("due_at", "failed_attempts"),
        )
    else:
        lifecycle.apply(
            execution,
            "fail" if verdict.verdict == retry.Verdict.FAIL else "flag",
            actor_label=lease.owner,
            reason=f"{step.label}: {failure.message} ({verdict.reason})",
            code=_stop_code(failure, verdict, unexpected=unexpected),
            step=step.name,
            payload=payload,
            update_fields=("failed_attempts",),
        )
    release(lease)


# Why a failed step stopped, as a word of the stuck vocabulary (docs/design.md §4).
_CODES = {
    FailureKind.OUTCOME_UNKNOWN: StuckReason.UNKNOWN_OUTCOME,
    FailureKind.PERMISSION: StuckReason.PERMISSION_DENIED,
}


def _stop_code(failure: StepFailure, verdict: retry.Ruling, *, unexpected: bool) -> str:
    if unexpected:
        return StuckReason.STEP_ERROR
    if failure.kind in _CODES:
        return _CODES[failure.kind]
    return StuckReason.RETRIES_EXHAUSTED if failure.kind in (FailureKind.TRANSIENT, FailureKind.RATE_LIMITED) else ""


def _needs_attention(lease: Lease, step: Step, stop: NeedsAttention, started) -> str:
    """One commit: the failed attempt with its evidence, then needs_attention with the
    stop's code (``model_drift``, ``budget_exceeded``…); no retry."""
    with transaction.atomic():
        execution = fenced_row(lease, running=True)
        output = {"evidence": stop.evidence} if stop.evidence is not None else {}
        _record_run(
            lease, execution, step, started, StepRun.Outcome.FAILED, output=output, error=f"{stop.code}: {stop}"
        )
        lifecycle.apply(
            execution, "flag", actor_label=lease.owner, reason=f"{step.label}: {stop}", code=stop.code, step=step.name
        )
        release(lease)
    log.warning("%s: %s needs attention (%s): %s", execution.ref, step.name, stop.code, stop)
    return STOP


def _stop_at_deadline(lease: Lease) -> str:
    """The deadline passed: failed, unless the current step left an action in flight; it
    may have acted, so a person establishes its outcome first (unknown_outcome)."""
    with transaction.atomic():
        execution = fenced_row(lease)
        passed = f"deadline {execution.deadline:%Y-%m-%d %H:%M:%S} UTC passed"
        acting = ledger.lose_in_flight(lease=lease, step=execution.current_step, why=passed)
        if acting is None:
            lifecycle.apply(execution, "fail", actor_label=lease.owner, reason=passed, code=StuckReason.DEADLINE_PASSED)
        else:
            lifecycle.apply(
                execution,
                "flag",
                actor_label=lease.owner,
                reason=f"{passed} with the outcome of {acting.key} unknown: establish it (resolve) first",
                code=StuckReason.UNKNOWN_OUTCOME,
                step=execution.current_step,
            )
        release(lease)
    return "stopped"


def _flag_outside_step(lease: Lease, reason: str, *, code: str = StuckReason.STEP_ERROR) -> str:
    """Send the execution to needs_attention with ``reason`` and give the lease up."""
    try:
        with transaction.atomic():
            execution = fenced_row(lease)
            if execution.status == Status.RUNNING:
                lifecycle.apply(execution, "flag", actor_label=lease.owner, reason=reason, code=code)
            release(lease)
    except LeaseLost:
        return "lease lost"
    return "stopped"


def _record_run(
    lease: Lease,
    execution: Execution,
    step: Step,
    started,
    outcome: str,
    *,
    output: dict,
    error: str = "",
    attempt: int | None = None,
) -> int:
    """Append this attempt's StepRun (inside the fenced transaction); returns the attempt
    number: the step's failed attempts in this round, plus one."""
    attempt = attempt or execution.failed_attempts + 1
    _run_of(lease, execution, step, started, outcome, output=output, error=error, attempt=attempt).save()
    return attempt


def _run_of(lease, execution, step, started, outcome, *, output: dict, error: str = "", attempt: int) -> StepRun:
    """This attempt's StepRun, unsaved (and its outcome on the step's span)."""
    tracing.outcome(outcome, **{"keel.attempt": attempt})
    return StepRun(
        execution=execution,
        step=step.name,
        kind=step.kind,
        round=execution.round,
        attempt=attempt,
        outcome=outcome,
        output=output,
        error=error,
        worker=lease.owner,
        lease_token=lease.token,
        workflow_version=execution.workflow_version,
        started_at=started,
    )
