"""What the notifications app keeps beside the ledger (issue 22).

The notification itself is an ``executions.Action`` (``beside=True``): its key, status,
attempts, receipt and history are the ledger's. Here: each person's preference, the
sender's schedule for each action (``Delivery``), the occasions already planned (so a
sweep plans each once), and how far the event log was read for webhooks.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Preference(models.Model):
    """One person's choice: e-mails about approvals, or none. No row: the default (on)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    email = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"e-mail {'on' if self.email else 'off'} for user {self.user_id}"


class Delivery(models.Model):
    """The sender's schedule for one beside action: when it is next due (None: nothing
    more to do — sent, refused for good, unknown, or no longer wanted)."""

    action = models.OneToOneField("executions.Action", on_delete=models.PROTECT, related_name="delivery")
    channel = models.CharField(max_length=20)  # a registered channel's name (notifications.channels)
    # E-mail: opened, reminder, approval_overdue, superseded. Webhook: the event's name.
    kind = models.CharField(max_length=60)
    request = models.ForeignKey(
        "approvals.ApprovalRequest", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    due_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["due_at"], condition=models.Q(due_at__isnull=False), name="delivery_due")]

    def __str__(self) -> str:
        return f"{self.channel} {self.kind} ({self.action_id})"


class Occasion(models.Model):
    """An occasion to tell people about an approval request, planned once: opened,
    reminder, approval_overdue, superseded. Its deliveries were recorded in the same
    transaction (possibly none: nobody to tell)."""

    request = models.ForeignKey("approvals.ApprovalRequest", on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=30)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["request", "kind"], name="one_occasion_per_request_kind")]

    def __str__(self) -> str:
        return f"{self.kind} of approval {self.request_id}"


class Cursor(models.Model):
    """How far a reader of the event log got (webhooks read transitions from it)."""

    name = models.CharField(max_length=60, primary_key=True)
    at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} at {self.at:%H:%M:%S}"
