"""API tokens: created by ``manage.py create_api_token``, sent as ``Authorization: Bearer``,
revoked by ``manage.py revoke_api_token``.

A token is valid until its ``expires_at`` (default 90 days after issue); an expired or
revoked token, or one of an inactive user, authenticates nobody (the API answers 401).
Only the token's sha256 is stored, with its first characters to tell tokens apart. A
refused request raises ``TokenRefused`` (the commands print its sentence).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from .models import ApiToken

DEFAULT_DAYS = 90
MAX_DAYS = 3650
PREFIX_LENGTH = 12  # "keel_" and 7 characters of the secret: enough to tell tokens apart
# last_used_at is written at most once per this interval per token, not on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenRefused(Exception):
    """A token can't be issued or revoked as asked; ``message`` says why (``field: …``
    when one argument is at fault). Nothing was written."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, kw_only=True)
class IssuedToken:
    token: str  # shown once, never stored
    id: int
    prefix: str
    expires_at: datetime


@dataclass(frozen=True, kw_only=True)
class TokenInfo:
    id: int
    prefix: str
    created_at: datetime
    expires_at: datetime
    last_used_at: datetime | None

    def describe(self) -> str:
        used = f"last used {self.last_used_at:%Y-%m-%d %H:%M}" if self.last_used_at else "never used"
        return (
            f"#{self.id} {self.prefix}… created {self.created_at:%Y-%m-%d}, expires {self.expires_at:%Y-%m-%d}, {used}"
        )


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def api_token_issue(*, user: AbstractBaseUser, days: int = DEFAULT_DAYS) -> IssuedToken:
    """Issues a token valid for ``days`` (1…3650); only its digest and prefix are stored."""
    if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= MAX_DAYS:
        raise TokenRefused(f"days: a token lives between 1 and {MAX_DAYS} days, not {days!r}")
    token = "keel_" + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(
        user=user,
        digest=_digest(token),
        prefix=token[:PREFIX_LENGTH],
        expires_at=timezone.now() + timedelta(days=days),
    )
    return IssuedToken(token=token, id=row.pk, prefix=row.prefix, expires_at=row.expires_at)


def api_token_create(*, user: AbstractBaseUser, days: int = DEFAULT_DAYS) -> str:
    """Issues a token and returns it (the form most callers need)."""
    return api_token_issue(user=user, days=days).token


def api_tokens_of(*, user: AbstractBaseUser) -> list[TokenInfo]:
    return [_info(row) for row in ApiToken.objects.filter(user=user)]


@transaction.atomic
def api_token_revoke(
    *, user: AbstractBaseUser, prefix: str | None = None, token_id: int | None = None
) -> list[TokenInfo]:
    """Deletes ``user``'s tokens: all of them, or the one with ``token_id``, or the one whose
    prefix starts with ``prefix``. Returns what was revoked; a selector that matches no
    token, or several (a prefix too short), is refused and nothing is revoked."""
    rows = ApiToken.objects.select_for_update().filter(user=user)
    if token_id is not None:
        rows = rows.filter(pk=token_id)
        if not rows:
            raise TokenRefused(f"{user.get_username()} has no token #{token_id}")
    elif prefix is not None:
        if not prefix:
            raise TokenRefused("prefix: give at least the first characters of the token")
        rows = rows.filter(prefix__startswith=prefix[:PREFIX_LENGTH])
        matched = list(rows)
        if not matched:
            raise TokenRefused(f"{user.get_username()} has no token starting with {prefix!r}")
        if len(matched) > 1:
            raise TokenRefused(f"prefix: {prefix!r} matches {len(matched)} tokens; give more characters or the id")
    revoked = [_info(row) for row in rows]
    ApiToken.objects.filter(pk__in=[info.id for info in revoked]).delete()
    return revoked


def user_for_token(token: str) -> AbstractBaseUser | None:
    """The active user an unexpired token belongs to, or None. Records the use at most once
    per ``LAST_USED_RESOLUTION`` (a conditional UPDATE), so reads don't write every time."""
    now = timezone.now()
    row = ApiToken.objects.select_related("user").filter(digest=_digest(token), expires_at__gt=now).first()
    if row is None or not row.user.is_active:
        return None
    stale = now - LAST_USED_RESOLUTION
    if row.last_used_at is None or row.last_used_at < stale:
        ApiToken.objects.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale), pk=row.pk).update(
            last_used_at=now
        )
    return row.user


def _info(row: ApiToken) -> TokenInfo:
    return TokenInfo(
        id=row.pk,
        prefix=row.prefix,
        created_at=row.created_at,
        expires_at=row.expires_at,
        last_used_at=row.last_used_at,
    )
