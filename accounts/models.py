"""Who may use the Task API without a session: API tokens. (Users and groups are
Django's own; the roles are ``accounts.roles``.)"""

from __future__ import annotations

from django.conf import settings
from django.db import models


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
        # The table executions' migrations created, kept when the model moved here.
        db_table = "executions_apitoken"
        ordering = ["id"]

    def __str__(self) -> str:
        return f"token #{self.pk} of {self.user_id} ({self.prefix}…)"
