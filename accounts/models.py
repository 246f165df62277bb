"""Who may use the Task API without a session (API tokens), and who a user is at the
single sign-on provider (``Identity``). (Users and groups are Django's own; the roles are
``accounts.roles``.)"""

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


class Identity(models.Model):
    """Who a user is at the OpenID provider: its ``issuer`` and the ``subject`` it names them
    by (the ID token's ``iss`` and ``sub``). Single sign-on finds a user by this pair and by
    nothing else (never by e-mail or username); a user has at most one."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identity")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    signed_in_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "identities"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="accounts_identity_one_per_subject")]

    def __str__(self) -> str:
        return f"signed in through {self.issuer} as {self.subject}"
