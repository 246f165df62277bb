"""Approval requests bound to one artifact version, and the decisions on them."""

from __future__ import annotations

import pgtrigger
from django.conf import settings
from django.db import models
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from access.managers import scoped


class ApprovalRequest(ConcurrentTransitionMixin, models.Model):
    """A person is asked to decide one action on one exact artifact version (and its hash).

    ``status`` is protected: it changes only through the transitions below, applied,
    saved and audited together by ``approvals.services.close_request``.
    """

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        CHANGES_REQUESTED = "changes_requested"
        SUPERSEDED = "superseded"
        WITHDRAWN = "withdrawn"
        EXPIRED = "expired"

    execution = models.ForeignKey("executions.Execution", on_delete=models.PROTECT, related_name="approval_requests")
    step = models.CharField(max_length=100)
    round = models.PositiveIntegerField(default=1)
    artifact_version = models.ForeignKey("artifacts.ArtifactVersion", on_delete=models.PROTECT, related_name="+")
    version = models.PositiveIntegerField()
    content_sha256 = models.CharField(max_length=64)
    action = models.CharField(max_length=60)
    # The approver policy, copied from the workflow's gate when the request is made.
    permission = models.CharField(max_length=100, default="approvals.decide_approval")
    group = models.CharField(max_length=150, blank=True, default="")  # optional: approver must be in it
    separation_of_duties = models.BooleanField(default=True)
    on_expiry = models.CharField(max_length=20, default="needs_attention")  # or "cancel"
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    status = FSMField(default=State.PENDING, choices=State.choices, protected=True, db_index=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    objects = scoped("execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["execution", "step", "round"], name="one_request_per_gate_round")
        ]
        indexes = [models.Index(fields=["status", "expires_at"], name="approval_status_expires")]
        permissions = [
            ("decide_approval", "Can approve or reject artifact versions"),
            ("approve_publish_report", "Can approve publishing a report version"),
            ("approve_submit_order", "Can approve submitting an order proposal"),
            ("view_audit", "Can read the approval audit trail"),
        ]

    def __str__(self) -> str:
        return f"approval {self.pk} ({self.action} V{self.version})"

    @property
    def is_pending(self) -> bool:
        return self.status == self.State.PENDING

    @property
    def gate_ref(self) -> str:
        """How the ledger names this request on the actions it authorises (``Action.gate_ref``)."""
        return gate_ref_for(self.pk)

    # --- Every request is closed exactly once, from pending.

    @transition(field=status, source=State.PENDING, target=State.APPROVED)
    def approve(self) -> None:
        """The approver approved this version."""

    @transition(field=status, source=State.PENDING, target=State.REJECTED)
    def reject(self) -> None:
        """The approver rejected it: the execution is cancelled, or continues at the gate's ``on_reject``."""

    @transition(field=status, source=State.PENDING, target=State.CHANGES_REQUESTED)
    def request_changes(self) -> None:
        """The approver asked for a new draft."""

    @transition(field=status, source=State.PENDING, target=State.SUPERSEDED)
    def supersede(self) -> None:
        """A newer version of the artifact exists (or a redraft was asked)."""

    @transition(field=status, source=State.PENDING, target=State.WITHDRAWN)
    def withdraw(self) -> None:
        """The execution was cancelled while it waited."""

    @transition(field=status, source=State.PENDING, target=State.EXPIRED)
    def expire(self) -> None:
        """Nobody decided before ``expires_at``."""


GATE_REF_PREFIX = "approval:"


def gate_ref_for(pk: int) -> str:
    return f"{GATE_REF_PREFIX}{pk}"


def request_id_from(ref: str) -> int | None:
    """``approval:12`` → 12; another gate's reference → None."""
    raw = ref.removeprefix(GATE_REF_PREFIX)
    return int(raw) if ref.startswith(GATE_REF_PREFIX) and raw.isdecimal() else None


class Decision(models.Model):
    """The one decision on a request (the OneToOne makes a second one impossible)."""

    class Verdict(models.TextChoices):
        APPROVE = "approve"
        REJECT = "reject"
        REQUEST_CHANGES = "request_changes"

    request = models.OneToOneField(ApprovalRequest, on_delete=models.PROTECT, related_name="decision")
    event_id = models.CharField(max_length=100, unique=True)
    decision = models.CharField(max_length=20, choices=Verdict.choices)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # The approver's username when they decided: history shows who decided, even after a rename.
    decided_by_username = models.CharField(max_length=150, blank=True, default="", db_default="")
    artifact_version = models.PositiveIntegerField()
    content_sha256 = models.CharField(max_length=64)
    comment = models.TextField(blank=True, default="")
    # The execution's status right after the decision, so a replay answers the same body.
    execution_status = models.CharField(max_length=30)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = scoped("request__execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["created_at"], name="decision_created")]  # the measures' windows
        triggers = [pgtrigger.Protect(name="decision_append_only", operation=pgtrigger.Update | pgtrigger.Delete)]

    def __str__(self) -> str:
        return f"{self.decision} on approval {self.request_id}"

    @property
    def approver(self) -> str:
        """Who decided, as they were called then (rows older than the column: the name now)."""
        return self.decided_by_username or self.decided_by.get_username()

    @property
    def verdict_past(self) -> str:
        """The decision as what happened to the version: approved, rejected, changes requested."""
        return {"approve": "approved", "reject": "rejected", "request_changes": "changes requested"}.get(
            self.decision, self.decision
        )


class AuditEntry(models.Model):
    """The audit trail: who did or tried what to which approval, and what they saw.

    Append-only in the database. Refused attempts are recorded too, with the reason.
    """

    class Kind(models.TextChoices):
        REQUESTED = "requested"
        VIEWED = "viewed"  # an approver opened the request: the version and hash they saw
        DECIDED = "decided"
        REFUSED = "refused"  # no authority, stale version, self-approval, already decided…
        REFUSALS_SUPPRESSED = "refusals_suppressed"  # one entry for a burst of refused attempts past the limit
        SUPERSEDED = "superseded"
        EXPIRED = "expired"
        WITHDRAWN = "withdrawn"

    kind = models.CharField(max_length=20, choices=Kind.choices, db_index=True)
    request = models.ForeignKey(ApprovalRequest, null=True, blank=True, on_delete=models.PROTECT, related_name="audit")
    execution = models.ForeignKey(
        "executions.Execution", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    actor_label = models.CharField(max_length=200, blank=True, default="")
    artifact_version = models.PositiveIntegerField(null=True, blank=True)
    content_sha256 = models.CharField(max_length=64, blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = scoped("execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        triggers = [pgtrigger.Protect(name="audit_entry_append_only", operation=pgtrigger.Update | pgtrigger.Delete)]

    def __str__(self) -> str:
        return f"{self.kind} {self.actor_label} #{self.request_id}"


class RefusalWindow(models.Model):
    """Per user: refused decisions in the current window (approvals.throttle). Not audit:
    a counter, updated in place; the audit keeps one summary entry per suppressed burst."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    started_at = models.DateTimeField()
    recorded = models.PositiveIntegerField(default=0)  # refusals audited one by one in this window
    suppressed = models.PositiveIntegerField(default=0)  # refusals answered 429, not yet summarised
    approval_ids = models.JSONField(default=list, blank=True)  # requests the suppressed attempts aimed at

    def __str__(self) -> str:
        return f"refusals of user {self.user_id} since {self.started_at:%H:%M:%S}"


class ApprovalTombstone(models.Model):
    """What is left in the database of an approval request whose execution was archived
    and purged (issue 39 item 10), written by ``retention.archiver.purge`` in the purge's
    transaction beside the execution's tombstone: enough for the approval history to keep
    its row, marked archived, and for its story to say when it was archived, where its
    record is and how to read it back (``keel archive --show``). Append-only, like the
    execution's tombstone: the application's role may only SELECT and INSERT it."""

    id = models.BigIntegerField(primary_key=True)  # the request's own pk (never reused)
    execution = models.ForeignKey(
        "executions.ExecutionTombstone", on_delete=models.PROTECT, related_name="approvals", db_index=True
    )
    action = models.CharField(max_length=60)
    step = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    content_sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=20)
    requested_by = models.CharField(max_length=150, blank=True, default="")  # the username at the purge
    requested_at = models.DateTimeField()
    decision = models.CharField(max_length=20, blank=True, default="")  # "": never decided
    decided_by = models.CharField(max_length=150, blank=True, default="")
    decided_at = models.DateTimeField(null=True, blank=True)

    objects = scoped("execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["-requested_at", "-id"], name="approval_tombstone_requested")]
        triggers = [
            pgtrigger.Protect(name="approval_tombstone_append_only", operation=pgtrigger.Update | pgtrigger.Delete)
        ]

    is_archived = True  # the history's row and the story say so (a live request has no such attribute)

    def __str__(self) -> str:
        return f"approval {self.pk} (archived)"
