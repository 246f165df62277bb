"""Approval requests bound to one artifact version, and the decisions on them."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApprovalRequest(models.Model):
    """A person is asked to decide one action on one exact artifact version (and its hash)."""

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
    permission = models.CharField(max_length=100, default="approvals.decide_approval")
    separation_of_duties = models.BooleanField(default=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=20, choices=State.choices, default=State.PENDING, db_index=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["execution", "step", "round"], name="one_request_per_gate_round")
        ]
        permissions = [
            ("decide_approval", "Can approve or reject artifact versions"),
            ("view_audit", "Can read the approval audit trail"),
        ]

    def __str__(self) -> str:
        return f"approval {self.pk} ({self.action} V{self.version})"

    @property
    def is_pending(self) -> bool:
        return self.status == self.State.PENDING


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
    artifact_version = models.PositiveIntegerField()
    content_sha256 = models.CharField(max_length=64)
    comment = models.TextField(blank=True, default="")
    # The execution's status right after the decision, so a replay answers the same body.
    execution_status = models.CharField(max_length=30)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
