"""The runtime's record: executions, their events, step runs, the action ledger, API tokens.

Nothing writes ``Execution.status`` except the FSM transitions below (the field is
protected), applied and saved by ``executions.lifecycle``.
"""

from __future__ import annotations

import pgtrigger
from django.conf import settings
from django.db import models
from django_fsm import ConcurrentTransitionMixin, FSMField, transition


class Status(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
    WAITING = "waiting", "Waiting"
    RETRY_PENDING = "retry_pending", "Retry pending"
    NEEDS_ATTENTION = "needs_attention", "Needs attention"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})
ACTIVE = frozenset(set(Status) - TERMINAL)
S = Status


class Execution(ConcurrentTransitionMixin, models.Model):
    """One agent task, with an identity independent of any process.

    ``lease_owner``/``lease_expires_at``/``lease_token`` belong to ``executions.leases``;
    ``status`` belongs to the transitions below; ``context`` holds the checkpointed
    state (step outputs, artifact references) and the progress notes for the model.
    """

    workflow = models.CharField(max_length=100)
    workflow_version = models.PositiveIntegerField()
    input = models.JSONField(default=dict)
    input_digest = models.CharField(max_length=64)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - NULL: no key (unique per user when set)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")

    status = FSMField(default=Status.PENDING, choices=Status.choices, protected=True, db_index=True)
    status_changed_at = models.DateTimeField(auto_now_add=True)
    status_reason = models.TextField(blank=True, default="")
    current_step = models.CharField(max_length=100, blank=True, default="")
    round = models.PositiveIntegerField(default=1)
    context = models.JSONField(default=dict)

    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.PositiveBigIntegerField(default=0)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    due_at = models.DateTimeField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["created_by", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="execution_idempotency_key_per_user",
            )
        ]
        indexes = [models.Index(fields=["status", "lease_expires_at"], name="execution_status_lease")]
        permissions = [("operate_execution", "Can triage, resume and cancel executions")]

    def __str__(self) -> str:
        return self.ref

    @property
    def ref(self) -> str:
        return ref_for(self.pk)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    # --- The lifecycle (DESIGN §4). Transitions change the object in memory only;
    # executions.lifecycle.apply saves them with the event in one transaction.

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


def ref_for(pk: int | None) -> str:
    return f"RUN_{pk:04d}" if pk is not None else "RUN_new"


def pk_from_ref(ref: str) -> int | None:
    """``RUN_0042`` (or ``42``) → 42; anything else → None."""
    raw = ref.upper().removeprefix("RUN_")
    return int(raw) if raw.isascii() and raw.isdecimal() and len(raw) <= 18 else None


class ExecutionEvent(models.Model):
    """Append-only history of one execution: transitions, steps, ledger changes, operator acts."""

    execution = models.ForeignKey(Execution, on_delete=models.PROTECT, related_name="events")
    type = models.CharField(max_length=60)
    from_status = models.CharField(max_length=30, blank=True, default="")
    to_status = models.CharField(max_length=30, blank=True, default="")
    step = models.CharField(max_length=100, blank=True, default="")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_label = models.CharField(max_length=200, blank=True, default="")
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["id"]
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

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="step_runs")
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

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["execution", "step", "round"],
                condition=models.Q(outcome="succeeded"),
                name="step_succeeds_once_per_round",
            )
        ]

    def __str__(self) -> str:
        return f"{self.execution_id}:{self.step}#{self.attempt}"


class Action(models.Model):
    """The ledger: one external side effect, keyed by its business identity.

    Committed as ``executing`` before the call, ``succeeded`` with the receipt after.
    A lost answer after sending is ``unknown``, never ``failed``.
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
    status = models.CharField(max_length=20, choices=State.choices, default=State.PLANNED)
    attempts = models.PositiveIntegerField(default=0)
    receipt = models.JSONField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    # The approval that authorises it (planned → approved), when one is required.
    approval_request = models.ForeignKey(
        "approvals.ApprovalRequest", null=True, blank=True, on_delete=models.PROTECT, related_name="actions"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.key


class ApiToken(models.Model):
    """A bearer token for the Task API. Only its sha256 is stored, with the first
    characters (``prefix``) so a person can tell their tokens apart and revoke one."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"token #{self.pk} of {self.user_id} ({self.prefix}…)"
