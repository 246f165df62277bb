"""The runtime's record: executions, their events, step runs, the model-call journal,
the action ledger, waits for signals.

One writer per status: ``Execution.status`` changes only through the transitions
below, applied and saved by ``executions.engine.lifecycle``; ``Action.status`` only through
its transitions, applied and saved with their event by ``executions.engine.ledger``;
``Wait.status`` only through its transitions, by ``executions.waits``. The fields
are protected: assigning them directly raises.
"""

from __future__ import annotations

from typing import Any

import pgtrigger
from django.conf import settings
from django.db import models
from django.db.models import Case, F, Q, Value, When
from django_fsm import RETURN_VALUE, ConcurrentTransitionMixin, FSMField, transition

from access.managers import scoped

from .about import about as about_input
from .choices import TextChoices
from .errors import Gone, NotFound


class Status(TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
    WAITING = "waiting", "Waiting"
    RETRY_PENDING = "retry_pending", "Retry pending"
    NEEDS_ATTENTION = "needs_attention", "Needs attention"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    PAUSED = "paused", "Paused"


TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})
ACTIVE = frozenset(set(Status) - TERMINAL)
S = Status
# Where an operator's hold (or a workflow's kill switch) can pause an execution from (docs/design.md §6 Operations).
HOLDABLE = (S.PENDING, S.RUNNING, S.RETRY_PENDING, S.WAITING, S.AWAITING_APPROVAL)
# Where an operator can move an execution to another version of its workflow from: live, and
# no worker holds it (triage.migration). It keeps its status, or runs again to re-open a gate.
MIGRATABLE = (S.PENDING, S.RETRY_PENDING, S.WAITING, S.AWAITING_APPROVAL, S.NEEDS_ATTENTION, S.PAUSED)


# What the progress notes hold when nothing is in them (executions.authoring.notes.initial),
# and the context's other parts when empty: left out of the stored row, put back when read.
NOTES_EMPTY: dict[str, Any] = {
    "goal": "",
    "constraints": [],
    "requested": [],
    "facts": [],
    "hypotheses": [],
    "completed_steps": [],
    "open_questions": [],
    "next_action": "",
}
CONTEXT_EMPTY: dict[str, Any] = {"artifacts": {}, "prompts": {}}


class ContextField(models.JSONField):
    """An execution's context, stored without its empty parts.

    The row is rewritten at every checkpoint, so each byte of it is written (and logged)
    once per step: the empty lists and objects of the progress notes (``NOTES_EMPTY``) and
    of the context (``CONTEXT_EMPTY``) are left out when stored and put back when read, so
    every reader — a workflow's ``ctx.notes["constraints"]`` included — sees the whole shape
    while the row holds only what is there."""

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(_compact(value))

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return _whole(super().from_db_value(value, expression, connection))


def _compact(context: Any) -> Any:
    if not isinstance(context, dict):
        return context
    stored = {k: v for k, v in context.items() if not (k in CONTEXT_EMPTY and v == CONTEXT_EMPTY[k])}
    notes = context.get("notes")
    if isinstance(notes, dict):
        stored["notes"] = {k: v for k, v in notes.items() if not (k in NOTES_EMPTY and v == NOTES_EMPTY[k])}
    return stored


def _whole(context: Any) -> Any:
    if not isinstance(context, dict):
        return context
    whole = {**{k: type(v)() for k, v in CONTEXT_EMPTY.items()}, **context}
    notes = context.get("notes")
    if isinstance(notes, dict):
        whole["notes"] = {**{k: type(v)() for k, v in NOTES_EMPTY.items()}, **notes}
    return whole


class Execution(ConcurrentTransitionMixin, models.Model):
    """One agent task, with an identity independent of any process.

    ``lease_owner``/``lease_expires_at``/``lease_token`` belong to ``executions.engine.leases``;
    ``status`` belongs to the transitions below; ``context`` holds the progress notes for
    the model, artifact references and what a restart carried over; the steps' outputs are
    in their step runs (``outputs()``).
    """

    workflow = models.CharField(max_length=100)
    workflow_version = models.PositiveIntegerField()
    input = models.JSONField(default=dict)
    input_digest = models.CharField(max_length=64)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - NULL: no key (unique per user when set)
    # Not indexed alone (issue 25: an index every execution writes, three times over its
    # life): nothing lists executions by who started them; the idempotency lookup has its
    # own index (created_by, idempotency_key); deleting a user (PROTECT) reads the table once.
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", db_index=False)

    # Not indexed alone: every index of the table that filters by status begins with it.
    status = FSMField(default=Status.PENDING, choices=Status.choices, protected=True)
    status_changed_at = models.DateTimeField(auto_now_add=True)
    status_reason = models.TextField(blank=True, default="")
    # Why it stopped, as a word from the stuck vocabulary (docs/design.md §4): waiting_overdue,
    # approval_lapsed, unknown_outcome…; "" when the status needs no reason.
    reason_code = models.CharField(max_length=40, blank=True, default="")
    current_step = models.CharField(max_length=100, blank=True, default="")
    round = models.PositiveIntegerField(default=1)
    context: dict[str, Any] = ContextField(default=dict)

    # Triage (executions.stuck): failed attempts of the current step in this round, when
    # the step running now must be done by (its timeout), and when the open gate is overdue.
    failed_attempts = models.PositiveIntegerField(default=0)
    step_deadline = models.DateTimeField(null=True, blank=True)
    gate_sla_at = models.DateTimeField(null=True, blank=True)

    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.PositiveBigIntegerField(default=0)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    due_at = models.DateTimeField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)
    # A restart (triage.restart): the failed execution this one continues, from one of
    # its steps. One restart per failed execution (``one_restart_per_execution``, a partial
    # unique index: the few restarts are its only entries); the other way, ``restart``.
    restarted_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="restarts", db_index=False
    )
    # A child execution (issue 21): the execution whose step ``parent_step`` started it, under
    # the key ``child_key`` that step gave it (unique per parent step, so a crash can't start
    # it twice); the other way, ``children``.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children", db_index=False
    )
    parent_step = models.CharField(max_length=100, blank=True, default="")
    child_key = models.CharField(max_length=200, blank=True, default="")
    # The cost budget in USD (issue 21, executions.engine.costs): no model call of this
    # execution or of its descendants starts unless its worst case fits what remains; None: no budget.
    budget_usd = models.DecimalField(max_digits=16, decimal_places=6, null=True, blank=True)
    # A hold (issue 22, executions.pauses): the status a paused execution left, which resume
    # returns it to, and whether its workflow's kill switch (not an operator) paused it.
    paused_from = models.CharField(max_length=30, blank=True, default="")
    paused_by_workflow = models.BooleanField(default=False)
    # A legal hold (issue 23, written by retention.holds): kept whatever its age while set.
    hold_reason = models.TextField(blank=True, default="")
    hold_by = models.ForeignKey(  # indexed where set (execution_hold_by)
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    hold_at = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = scoped("workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["created_by", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="execution_idempotency_key_per_user",
            ),
            models.UniqueConstraint(
                fields=["parent", "parent_step", "child_key"],
                condition=models.Q(parent__isnull=False),
                name="one_child_per_parent_step_key",
            ),
            models.UniqueConstraint(
                fields=["restarted_from"],
                condition=models.Q(restarted_from__isnull=False),
                name="one_restart_per_execution",
            ),
        ]
        indexes = [
            # Read for live executions only (the sweeper, no_worker, the Workers page): a
            # completion adds no entry (issue 46, bytes).
            models.Index(
                fields=["status", "lease_expires_at"],
                name="execution_status_lease",
                condition=Q(status__in=["pending", "running"]),
            ),
            # Ascending, read backwards for the newest first: a new execution's entry lands at the
            # end of its group, where a full page splits after it and stays full; in (…, -id) it
            # landed at the start, and each split left two half-empty pages (issue 46, bytes).
            models.Index(fields=["status", "id"], name="execution_status_id"),
            # Partial where most rows have nothing to find (issue 25): an execution that never
            # waits, has no deadline, never stops for a reason or is never held writes no
            # entry in these (every query on them asks for a value, which implies the condition).
            models.Index(fields=["status", "due_at"], name="execution_status_due", condition=Q(due_at__isnull=False)),
            models.Index(
                fields=["status", "deadline"], name="execution_status_deadline", condition=Q(deadline__isnull=False)
            ),
            models.Index(fields=["workflow", "id"], name="execution_workflow_id"),
            models.Index(fields=["reason_code", "id"], name="execution_reason_id", condition=~Q(reason_code="")),
            models.Index(fields=["hold_by"], name="execution_hold_by", condition=Q(hold_by__isnull=False)),
            # The stuck counts' approval_overdue and waiting_overdue (stuck.counts): only rows
            # that ever waited at a gate.
            models.Index(
                fields=["status", "gate_sla_at"], name="execution_status_sla", condition=Q(gate_sla_at__isnull=False)
            ),
            models.Index(fields=["status", "status_changed_at"], name="execution_status_changed"),
            # The counts of the live executions and of the failed ones by reason (by workflow,
            # by stuck reason, by version: triage.tallies, stuck.counts, catalogue.live_counts)
            # read this index alone, not the rows; the other terminal ones are tallied (the
            # (status, status_changed_at) index), so a completion or a cancel adds no entry
            # here (issue 46, bytes).
            models.Index(
                fields=["status", "workflow", "reason_code", "workflow_version"],
                name="execution_status_workflow_code",
                condition=Q(status__in=sorted(ACTIVE | {Status.FAILED})),
            ),
        ]
        permissions = [("operate_execution", "Can triage, resume and cancel executions")]

    def __str__(self) -> str:
        return self.ref

    @property
    def ref(self) -> str:
        return ref_for(self.pk)

    @property
    def about(self) -> str:
        """What it is about, from its input (``month 2026-06``): executions.about."""
        return about_input(self.input)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    def start_round(self) -> str:
        """Begin a new round (a gate asked again, changes requested): the steps and asks
        of the rounds before stay recorded under theirs. The one writer of ``round``; in
        memory, like a transition; returns the field for the caller's fenced save."""
        self.round += 1
        return "round"

    def outputs(self) -> dict[str, Any]:
        """Each completed step's output, by step name (what ``ctx.state`` shows a step).

        Outputs are stored once, in the step runs: the latest succeeded run of each step,
        over what a restart carried over from the execution it continues
        (``context["carried"]``; ``context["state"]`` in rows written before issue 25, which
        held a copy of every output). Read once per instance — the claim's read brings them
        with the row on PostgreSQL (``succeeded_outputs``) — then kept in memory: the runner
        adds each step's output as it checkpoints."""
        cached = self.__dict__.get("_outputs")
        if cached is not None:
            return cached
        context = self.context or {}
        loaded = self.__dict__.pop("succeeded_outputs", None)
        if loaded is None:
            loaded = dict(self.succeeded_runs().values_list("step", "output")) if self.pk is not None else {}
        self._outputs = {**context.get("state", {}), **context.get("carried", {}), **loaded}
        return self._outputs

    def refresh_from_db(self, *args: Any, **kwargs: Any) -> None:
        """Read again from the database, the outputs too (on their next use)."""
        super().refresh_from_db(*args, **kwargs)
        self.__dict__.pop("_outputs", None)
        self.__dict__.pop("_visit_outputs", None)

    def show_outputs(self, outputs: dict[str, Any], *, visits: dict[str, list[Any]] | None = None) -> None:
        """In memory only, on a copy that must read as of another moment (a replay, a gate
        reading its own outcome): ``outputs()`` answers ``outputs`` from now on, and
        ``visit_outputs`` answers from ``visits`` when it is given."""
        self._outputs = outputs
        if visits is not None:
            self._visit_outputs = visits

    def visit_outputs(self, step: str) -> list[Any]:
        """Every completed visit's output of ``step``, oldest first (``ctx.visits``): the
        visits a restart carried over (``context["carried_visits"]``), then its own
        succeeded runs. ``outputs()[step]`` is the last."""
        shown = self.__dict__.get("_visit_outputs")
        if shown is not None:
            return list(shown.get(step, []))
        if step not in self.outputs():
            return []
        context = self.context or {}
        if "carried_visits" in context:
            carried = [output for name, output in context["carried_visits"] if name == step]
        else:  # a restart before visits were carried: its latest output only
            carried = [context["carried"][step]] if step in context.get("carried", {}) else []
        runs = self.succeeded_runs().filter(step=step)
        own = list(runs.values_list("output", flat=True)) if self.pk is not None else []
        return [*carried, *own] or [self.outputs()[step]]

    def succeeded_runs(self) -> models.QuerySet[StepRun]:
        """Its succeeded step runs, oldest first, that count as its visits: after a migration
        to another version (``context["migrated_through"]``, the last run before it), only
        the later ones; what came before is carried over, as the migration mapped it
        (``context["carried_visits"]``, triage.migration), the way a restart carries."""
        runs = StepRun.objects.filter(execution_id=self.pk, outcome=StepRun.Outcome.SUCCEEDED)
        through = (self.context or {}).get("migrated_through")
        return (runs.filter(pk__gt=through) if through else runs).order_by("id")

    @property
    def restart(self) -> Execution | None:
        """The execution that restarted this one, or None (there is at most one)."""
        return self.restarts.first()

    # --- The lifecycle (docs/design.md §4). Transitions change the object in memory only;
    # executions.engine.lifecycle.apply saves them with the event in one transaction.

    @transition(field=status, source=S.PENDING, target=S.RUNNING)
    def start(self) -> None:
        """Claimed by a worker for the first time."""

    @transition(field=status, source=S.RUNNING, target=S.AWAITING_APPROVAL)
    def await_approval(self) -> None:
        """An approval gate asked a person; no worker is held."""

    @transition(field=status, source=S.RUNNING, target=S.WAITING)
    def wait(self) -> None:
        """Waiting for a timer or an external event."""

    @transition(field=status, source=S.RUNNING, target=S.RETRY_PENDING)
    def schedule_retry(self) -> None:
        """A step failed retryably; ``due_at`` says when to try again."""

    @transition(field=status, source=[S.RUNNING, S.AWAITING_APPROVAL, S.WAITING], target=S.NEEDS_ATTENTION)
    def flag(self) -> None:
        """A person must look: unknown outcome, expired approval, deadline, refusal."""

    @transition(field=status, source=S.RUNNING, target=S.COMPLETED)
    def complete(self) -> None:
        """The last step finished."""

    @transition(field=status, source=[S.RUNNING, S.RETRY_PENDING, S.NEEDS_ATTENTION], target=S.FAILED)
    def fail(self) -> None:
        """Stopped for good."""

    @transition(field=status, source=list(ACTIVE), target=S.CANCELLED)
    def cancel(self) -> None:
        """Cancelled by a person or by a rejection; never resumes."""

    @transition(field=status, source=S.AWAITING_APPROVAL, target=S.RUNNING)
    def resume_after_decision(self) -> None:
        """Approved, or changes requested: the workflow continues."""

    @transition(field=status, source=S.WAITING, target=S.RUNNING)
    def wake(self) -> None:
        """The timer fired or the event arrived."""

    @transition(field=status, source=S.RETRY_PENDING, target=S.RUNNING)
    def retry(self) -> None:
        """The retry is due and a worker claimed it."""

    @transition(field=status, source=S.NEEDS_ATTENTION, target=S.RUNNING)
    def resume(self) -> None:
        """An operator resumed or resolved it."""

    @transition(field=status, source=list(HOLDABLE), target=S.PAUSED)
    def pause(self) -> None:
        """An operator's hold, or its workflow's kill switch: remembers the status it left
        (the caller saves ``paused_from``)."""
        self.paused_from = self.status

    @transition(field=status, source=list(MIGRATABLE), target=RETURN_VALUE(*MIGRATABLE, S.RUNNING))
    def migrate(self, *, reopen: bool = False) -> str:
        """Moved to another version of its workflow by an operator (the caller saves
        ``workflow_version`` and what the move changed): it keeps its status, or, to ask a
        gate again that the new version asks differently (``reopen``), runs again."""
        return S.RUNNING if reopen else self.status

    @transition(field=status, source=S.PAUSED, target=RETURN_VALUE(*HOLDABLE))
    def unpause(self) -> str:
        """The hold lifted: back to the status it left (the caller saves ``paused_from``
        and ``paused_by_workflow``, cleared)."""
        left, self.paused_from, self.paused_by_workflow = self.paused_from, "", False
        return left


# The permission of operators (triage, resume, cancel, resolve), declared on Execution.
OPERATE = "executions.operate_execution"


def execution_for(ref: str) -> Execution:
    """The execution ``ref`` names (``RUN_0042`` or ``42``); NotFound if none."""
    pk = pk_from_ref(ref)
    execution = Execution.objects.filter(pk=pk).first() if pk is not None else None
    if execution is None:
        tombstone = ExecutionTombstone.objects.filter(pk=pk).first() if pk is not None else None
        if tombstone is not None:
            raise tombstone.gone()
        raise NotFound(f"no execution {ref}")
    return execution


class ExecutionTombstone(models.Model):
    """What is left in the database of an execution archived and purged (issue 23,
    written by retention.purge in the purge's transaction): its id, when it ended, when
    it was archived and the manifest that holds it; its owner's idempotency key, so the
    key is never silently reused. Append-only (issue 38): the application's role may only
    SELECT and INSERT it, so an archived execution can't turn from 410 into 404 nor its
    key be freed; ``keel archive --verify`` checks each against the manifests."""

    id = models.BigIntegerField(primary_key=True)  # the execution's own pk (never reused)
    workflow = models.CharField(max_length=100)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - NULL: no key
    ended_at = models.DateTimeField()
    archived_at = models.DateTimeField()
    manifest = models.CharField(max_length=300)

    objects = scoped("workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(
                fields=["created_by", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="tombstone_idempotency_key",
            )
        ]
        triggers = [pgtrigger.Protect(name="tombstone_append_only", operation=pgtrigger.Update | pgtrigger.Delete)]

    def __str__(self) -> str:
        return ref_for(self.pk)

    def gone(self) -> Gone:
        return Gone(
            f"{ref_for(self.pk)} was archived and purged; its record is in the archive {self.manifest}",
            archived_at=self.archived_at.isoformat(),
            manifest=self.manifest,
        )


def ref_for(pk: int | None) -> str:
    return f"RUN_{pk:04d}" if pk is not None else "RUN_new"


def pk_from_ref(ref: str) -> int | None:
    """``RUN_0042`` (or ``42``) → 42; anything else → None."""
    raw = ref.upper().removeprefix("RUN_")
    return int(raw) if raw.isascii() and raw.isdecimal() and len(raw) <= 18 else None


class WorkflowSwitch(models.Model):
    """A workflow's kill switch thrown (``paused``) or lifted, by whom and why: append-only,
    one row per switch (the audit), the latest row of a workflow being its state
    (executions.pauses). No row: the workflow runs. ``created_at`` is the database's clock
    for every role but the owner (``keel_stamp_created_at``, as on the other append-only
    tables)."""

    workflow = models.CharField(max_length=100)
    paused = models.BooleanField()
    reason = models.TextField()
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = scoped("workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["workflow", "-id"], name="workflow_switch_latest")]
        triggers = [
            pgtrigger.Protect(name="workflow_switch_append_only", operation=pgtrigger.Update | pgtrigger.Delete)
        ]

    def __str__(self) -> str:
        return f"{self.workflow} {'paused' if self.paused else 'resumed'}"


class Rollout(models.Model):
    """Which version of a workflow new starts without a ``version`` go to (triage.rollout):
    ``percent`` of them to ``version``, the rest to the highest registered version below it.
    Append-only, one row per change (the audit); the latest row of a workflow is its state.
    No row: every start goes to the latest registered version."""

    workflow = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    percent = models.PositiveSmallIntegerField()
    reason = models.TextField()
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = scoped("workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["workflow", "-id"], name="rollout_latest")]
        triggers = [pgtrigger.Protect(name="rollout_append_only", operation=pgtrigger.Update | pgtrigger.Delete)]

    def __str__(self) -> str:
        return f"{self.workflow} v{self.version} at {self.percent}%"


class ExecutionEvent(models.Model):
    """Append-only history of one execution: transitions, steps, ledger changes, operator acts."""

    execution = models.ForeignKey(Execution, on_delete=models.PROTECT, related_name="events")
    type = models.CharField(max_length=60)
    from_status = models.CharField(max_length=30, blank=True, default="")
    to_status = models.CharField(max_length=30, blank=True, default="")
    step = models.CharField(max_length=100, blank=True, default="")
    actor = models.ForeignKey(  # indexed where set (event_actor): a worker's events have no actor
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    actor_label = models.CharField(max_length=200, blank=True, default="")
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)  # read by type: (type, created_at)

    objects = scoped("execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        # The measures (metrics/) read a window of one type of event. (A BRIN index on
        # created_at instead would save ~290 B of WAL a workflow, but a week's charts at a
        # million executions took 112-166 ms with it against 85-88 with this: kept, issue 46.)
        indexes = [
            models.Index(fields=["type", "created_at"], name="event_type_created"),
            models.Index(fields=["actor"], name="event_actor", condition=Q(actor__isnull=False)),
        ]
        # Append-only in the database itself, not only in Python (PostgreSQL).
        triggers = [
            pgtrigger.Protect(name="execution_event_append_only", operation=pgtrigger.Update | pgtrigger.Delete)
        ]

    def __str__(self) -> str:
        return f"{self.execution_id}:{self.type}"


class StepRun(models.Model):
    """One attempt at one step. A succeeded run is the step's checkpoint and is never rerun."""

    class Outcome(models.TextChoices):
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    # No index of its own: the unique (execution, step, round, succeeded) begins with it.
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="step_runs", db_index=False)
    step = models.CharField(max_length=100)
    kind = models.CharField(max_length=20)
    round = models.PositiveIntegerField(default=1)
    attempt = models.PositiveIntegerField(default=1)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    output = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    worker = models.CharField(max_length=200, blank=True, default="")
    lease_token = models.PositiveBigIntegerField()
    workflow_version = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(auto_now_add=True)

    objects = scoped("execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        # One index serves the guarantee and every read of an execution's runs (issue 46: the
        # runs' bytes): a step succeeds once per round, as its last part is 1 for a succeeded
        # run and NULL (never equal to another) for a failed one; it begins with the execution,
        # and carries ``started_at`` (PostgreSQL), so "a run of this execution started between
        # two times" (the measures' resumes) reads the index alone, not every run's row.
        # The measures (metrics/) read the runs of a window by ``finished_at`` through a BRIN
        # index on PostgreSQL (``steprun_finished``, made by migration 0031 outside Django's
        # declared indexes: a few bytes per hundreds of rows, where a B-tree took an entry per
        # run; a B-tree elsewhere).
        constraints = [
            models.UniqueConstraint(
                F("execution"),
                F("step"),
                F("round"),
                Case(When(outcome="succeeded", then=Value(1))),
                name="step_succeeds_once_per_round",
                include=["started_at"],
            )
        ]

    def __str__(self) -> str:
        return f"{self.execution_id}:{self.step}#{self.attempt}"


class ModelCall(models.Model):
    """The model-call journal: one row per call, keyed ``{execution}:{step}:r{round}:c{seq}``.

    Inserted (fenced by the lease) as soon as the answer arrives, before the step goes
    on, and never changed: when the step runs again, each call is looked up by its key
    first (executions.engine.journal). ``request`` is the canonical request whose sha256 is
    ``request_sha256``; ``response`` holds the text and the proposed tool calls.

    A call asked again because an operator accepted the request rebuilt after a drift
    is a new row with the same key and the next ``revision``, pointing at the one it
    ``supersedes`` (kept as it was: the journal reads the latest revision of a key).
    """

    key = models.CharField(max_length=200)
    revision = models.PositiveIntegerField(default=1, db_default=1)  # a raw INSERT without it: the first
    supersedes = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="superseded_by"
    )
    execution = models.ForeignKey(Execution, on_delete=models.PROTECT, related_name="model_calls")
    step = models.CharField(max_length=100)
    round = models.PositiveIntegerField()
    seq = models.PositiveIntegerField()
    provider = models.CharField(max_length=40)  # offline, openai, anthropic
    adapter = models.CharField(max_length=200)  # the client class
    model = models.CharField(max_length=200)  # requested
    model_returned = models.CharField(max_length=200, blank=True, default="")
    prompt_id = models.CharField(max_length=100, blank=True, default="")
    prompt_version = models.CharField(max_length=100, blank=True, default="")
    request_sha256 = models.CharField(max_length=64)
    request = models.JSONField()
    response = models.JSONField()  # {"text", "tool_calls": [{"id", "name", "args"}]}
    finish_reason = models.CharField(max_length=40, blank=True, default="")
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)  # when known
    response_id = models.CharField(max_length=200, blank=True, default="")
    worker = models.CharField(max_length=200, blank=True, default="")
    lease_token = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    objects = scoped("execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["key", "revision"], name="model_call_key_revision")]
        indexes = [models.Index(fields=["execution", "step", "round", "seq"], name="model_call_step_seq")]
        triggers = [pgtrigger.Protect(name="model_call_append_only", operation=pgtrigger.Update | pgtrigger.Delete)]

    def __str__(self) -> str:
        return self.key


class CostReservation(models.Model):
    """The worst case of one model call, reserved against the budgets above it before the
    call is asked (executions.engine.costs). One per call key and revision; it is settled
    by the journal: once the ModelCall with the same key and revision exists, the call's
    recorded ``cost`` counts instead, so a reservation never needs to be deleted."""

    key = models.CharField(max_length=200)
    revision = models.PositiveIntegerField(default=1)
    execution = models.ForeignKey(Execution, on_delete=models.PROTECT, related_name="cost_reservations")
    amount_usd = models.DecimalField(max_digits=16, decimal_places=6)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = scoped("execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["key", "revision"], name="cost_reservation_key_revision")]
        indexes = [models.Index(fields=["execution"], name="cost_reservation_execution")]

    def __str__(self) -> str:
        return f"{self.key}#{self.revision}"


def _never_sent(action: Action) -> bool:
    return action.attempts == 0 and not action.is_compensation and not action.beside


class Action(ConcurrentTransitionMixin, models.Model):
    """The ledger: one external side effect, keyed by its business identity.

    Committed as ``executing`` before the call, ``succeeded`` with the receipt after.
    A lost answer after sending is ``unknown``, never ``failed``. ``status`` changes
    only through the transitions below, each saved with its ``action.<status>``
    event by ``executions.engine.ledger``.
    """

    class State(models.TextChoices):
        PLANNED = "planned"
        APPROVED = "approved"
        EXECUTING = "executing"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        UNKNOWN = "unknown"

    key = models.CharField(max_length=200, unique=True)
    execution = models.ForeignKey(Execution, on_delete=models.PROTECT, related_name="actions")
    step = models.CharField(max_length=100)
    type = models.CharField(max_length=60)
    args = models.JSONField(default=dict)
    status = FSMField(default=State.PLANNED, choices=State.choices, protected=True)
    attempts = models.PositiveIntegerField(default=0)
    receipt = models.JSONField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    # What authorises it (planned → approved), when a gate guards it: the gate's own
    # reference, e.g. "approval:12" (executions.engine.gates).
    gate_ref = models.CharField(max_length=100, blank=True, default="", db_index=True)
    # Whether the provider de-duplicates on the key (the Effect's ``honors_key``, as the
    # worker that planned or sent it knew it): a resume preview reads it to say whether
    # running the step again could repeat the effect.
    honors_key = models.BooleanField(default=True)
    # Sent beside the steps by a task of its own (a notification, a webhook: issue 22),
    # never by the execution's worker: it belongs to the execution (listed among its
    # actions) but never holds it up — its failure or unknown outcome is recorded and
    # shown, never a resume blocker or a reason for needs_attention.
    beside = models.BooleanField(default=False, db_default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = scoped("execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        # The few actions still planned (awaiting their approval, or a compensation a person
        # must carry out): the triage console finds the cancelled executions that wait on one.
        # The ledger's counts by status (triage.tallies): the succeeded ones, which never change
        # again, are tallied and those that succeeded since found by time; the rest are few.
        indexes = [
            models.Index(fields=["execution"], condition=models.Q(status="planned"), name="action_planned_execution"),
            models.Index(fields=["updated_at"], condition=models.Q(status="succeeded"), name="action_succeeded_at"),
            models.Index(fields=["status"], condition=~models.Q(status="succeeded"), name="action_unsettled_status"),
            # The notifications sent beside the steps, by channel and outcome (metrics): few of all.
            models.Index(fields=["type", "status"], condition=models.Q(beside=True), name="action_beside_type_status"),
        ]

    def __str__(self) -> str:
        return self.key

    # --- The ledger's states (docs/design.md §4). executions.engine.ledger applies and records them.

    @transition(field=status, source=State.PLANNED, target=State.APPROVED)
    def approve(self) -> None:
        """The gate guarding it passed: it may run."""

    @transition(field=status, source=[State.PLANNED, State.APPROVED], target=State.FAILED)
    def void(self) -> None:
        """It will never run: refused, superseded or expired approval, or a cancel."""

    @transition(field=status, source=[State.PLANNED, State.FAILED], target=State.PLANNED, conditions=[_never_sent])
    def replan(self) -> None:
        """A gate asks again (a new round, another version's gate) and plans it anew: never
        sent, it takes the new plan's type, arguments and gate."""

    @transition(
        field=status,
        source=[State.PLANNED, State.APPROVED, State.EXECUTING, State.FAILED, State.UNKNOWN],
        target=State.EXECUTING,
    )
    def begin(self) -> None:
        """About to be sent (again, with the same key), committed before the call."""

    @transition(field=status, source=State.EXECUTING, target=State.APPROVED)
    def defer(self) -> None:
        """The provider answered that it needs a person's input before it acts (an MCP
        elicitation): nothing was done; it is sent again, with the same key, once answered."""

    @transition(field=status, source=[State.EXECUTING, State.UNKNOWN, State.FAILED], target=State.SUCCEEDED)
    def succeed(self) -> None:
        """The provider's receipt is known: from the call, a lookup, or an operator."""

    @transition(field=status, source=[State.EXECUTING, State.UNKNOWN, State.FAILED], target=State.FAILED)
    def fail(self) -> None:
        """The provider refused it (or an operator established that it failed)."""

    @transition(field=status, source=[State.EXECUTING, State.UNKNOWN, State.FAILED], target=State.UNKNOWN)
    def lose(self) -> None:
        """Sent, and the answer was lost: the outcome can't be established yet."""

    # A compensation (``<key>:compensate``) is recorded planned on cancel and carried out
    # by a person, outside the runtime; an operator closes it with evidence.

    @transition(field=status, source=State.PLANNED, target=State.SUCCEEDED)
    def close_done(self) -> None:
        """A person carried out this compensation."""

    @transition(field=status, source=State.PLANNED, target=State.FAILED)
    def close_failed(self) -> None:
        """A person tried this compensation and it could not be done."""

    @property
    def is_compensation(self) -> bool:
        return self.key.endswith(COMPENSATION_SUFFIX)


COMPENSATION_SUFFIX = ":compensate"


class Wait(ConcurrentTransitionMixin, models.Model):
    """One visit of a wait gate (executions.waits): the execution waits for the signal
    ``signal`` (or, without one, for ``due_at``). Closed exactly once: received,
    timed out, or withdrawn by a cancel."""

    class State(models.TextChoices):
        WAITING = "waiting"
        RECEIVED = "received"
        TIMED_OUT = "timed_out"
        WITHDRAWN = "withdrawn"

    execution = models.ForeignKey(Execution, on_delete=models.PROTECT, related_name="waits")
    step = models.CharField(max_length=100)
    round = models.PositiveIntegerField(default=1)
    signal = models.CharField(max_length=100, blank=True, default="")  # "": a timer
    status = FSMField(default=State.WAITING, choices=State.choices, protected=True, db_index=True)
    opened_at = models.DateTimeField(auto_now_add=True)
    due_at = models.DateTimeField(null=True, blank=True)  # the timeout (or the timer)
    closed_at = models.DateTimeField(null=True, blank=True)
    # The signal that closed it, and what the sender was answered (replayed for the same event_id).
    # Unique per execution (not globally): someone else's waiting run can't squat an id.
    event_id = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001 - NULL: not received
    payload = models.JSONField(null=True, blank=True)
    sent_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField(blank=True, default="")
    execution_status = models.CharField(max_length=30, blank=True, default="")

    objects = scoped("execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["execution", "step", "round"], name="one_wait_per_step_round"),
            models.UniqueConstraint(fields=["execution", "event_id"], name="one_signal_event_per_execution"),
        ]
        indexes = [models.Index(fields=["status", "due_at"], name="wait_status_due")]

    def __str__(self) -> str:
        return f"wait {self.pk} for {self.signal or 'a timer'} ({self.status})"

    @transition(field=status, source=State.WAITING, target=State.RECEIVED)
    def receive(self) -> None:
        """The signal arrived (or the timer fired)."""

    @transition(field=status, source=State.WAITING, target=State.TIMED_OUT)
    def time_out(self) -> None:
        """The timeout passed without the signal."""

    @transition(field=status, source=State.WAITING, target=State.WITHDRAWN)
    def withdraw(self) -> None:
        """The execution was cancelled while waiting."""


class Question(ConcurrentTransitionMixin, models.Model):
    """What a tool's provider asked a person mid-call (an MCP server's elicitation:
    executions.questions): the execution waits, ``pending_input`` in the API, until
    someone answers. ``input_id`` is the question's id, the same every time the call asks
    it again (the tool call and the server's key for the question). Closed exactly once:
    answered, or withdrawn by a cancel."""

    class State(models.TextChoices):
        OPEN = "open"
        ANSWERED = "answered"
        WITHDRAWN = "withdrawn"

    execution = models.ForeignKey(Execution, on_delete=models.PROTECT, related_name="questions")
    step = models.CharField(max_length=100)
    round = models.PositiveIntegerField(default=1)
    input_id = models.CharField(max_length=300)
    tool = models.CharField(max_length=200)
    message = models.TextField()
    schema = models.JSONField(default=dict)  # the JSON Schema an answer must meet
    status = FSMField(default=State.OPEN, choices=State.choices, protected=True, db_index=True)
    opened_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    answer = models.JSONField(null=True, blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # The answer's event_id (unique per execution: the same post again answers the same).
    event_id = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001 - NULL: not answered
    execution_status = models.CharField(max_length=30, blank=True, default="")

    objects = scoped("execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["execution", "input_id"], name="one_question_per_input_id"),
            models.UniqueConstraint(fields=["execution", "event_id"], name="one_answer_event_per_execution"),
        ]

    def __str__(self) -> str:
        return f"question {self.input_id} ({self.status})"

    @transition(field=status, source=State.OPEN, target=State.ANSWERED)
    def receive(self) -> None:
        """Someone answered it."""

    @transition(field=status, source=State.OPEN, target=State.WITHDRAWN)
    def withdraw(self) -> None:
        """The execution was cancelled while it waited for the answer."""
