"""Writing the audit trail. Every approval event, refused attempts included, goes through here."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from .models import ApprovalRequest, AuditEntry


def record(
    kind: str,
    *,
    request: ApprovalRequest | None = None,
    execution=None,
    actor: AbstractBaseUser | None = None,
    actor_label: str = "",
    artifact_version: int | None = None,
    content_sha256: str = "",
    **detail: Any,
) -> AuditEntry:
    """Append one entry. Runs in the caller's transaction (a refusal: in its own)."""
    if actor is not None and not getattr(actor, "is_authenticated", False):
        actor, actor_label = None, actor_label or "anonymous"
    if actor is not None and not actor_label:
        actor_label = f"user:{actor.get_username()}"
    if request is not None and execution is None:
        execution = request.execution
    return AuditEntry.objects.create(
        kind=kind,
        request=request,
        execution=execution,
        actor=actor,
        actor_label=actor_label,
        artifact_version=artifact_version,
        content_sha256=content_sha256,
        detail=detail,
    )
