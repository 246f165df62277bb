"""API tokens: created by ``manage.py create_api_token``, sent as ``Authorization: Bearer``."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from .models import ApiToken


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def api_token_create(*, user: AbstractBaseUser) -> str:
    """Returns the token; only its digest is stored, so it can't be shown again."""
    token = "keel_" + secrets.token_urlsafe(32)
    ApiToken.objects.create(user=user, digest=_digest(token))
    return token


def user_for_token(token: str) -> AbstractBaseUser | None:
    row = ApiToken.objects.select_related("user").filter(digest=_digest(token)).first()
    if row is None or not row.user.is_active:
        return None
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
    return row.user
