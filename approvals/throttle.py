"""Refused decisions, limited per user so nobody can flood the append-only audit.

Within a window of ``window_seconds`` (database clock) a user's first ``burst``
refused attempts are audited one by one. Past that, further refused attempts are
answered 429 and only counted, on the user's one ``RefusalWindow`` row (locked, so
several web processes agree). When the window has closed, one ``refusals_suppressed``
audit entry summarises what was suppressed: written by the user's next refused
attempt, or by the sweeper (``flush_closed``), whichever comes first.

Limits from settings (defaults in brackets): ``APPROVAL_REFUSAL_BURST`` [10],
``APPROVAL_REFUSAL_WINDOW_SECONDS`` [60]. Cost: one locked row read and one update per
refused attempt; nothing for accepted decisions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import DateTimeField, ExpressionWrapper, Value
from django.db.models.functions import Now

from . import audit
from .models import ApprovalRequest, AuditEntry, RefusalWindow

MAX_REMEMBERED_REQUESTS = 20


def burst() -> int:
    return getattr(settings, "APPROVAL_REFUSAL_BURST", 10)


def window() -> timedelta:
    return timedelta(seconds=getattr(settings, "APPROVAL_REFUSAL_WINDOW_SECONDS", 60))


@dataclass(frozen=True)
class Admission:
    """Whether this refused attempt gets its own audit entry; if not, when to come back."""

    record: bool
    retry_after: int = 0


def admit(*, user: AbstractBaseUser, approval_id: int | None) -> Admission:
    """Count one refused attempt by ``user``. Runs in the caller's transaction, which must
    also write the attempt's audit entry when ``record`` is true."""
    assert transaction.get_connection().in_atomic_block
    row = _locked_row(user)
    elapsed = row.db_now - row.started_at
    if elapsed >= window():
        if row.suppressed:
            _summarise(row)
        row.started_at, row.recorded, row.suppressed, row.approval_ids = row.db_now, 1, 0, []
        row.save(update_fields=["started_at", "recorded", "suppressed", "approval_ids"])
        return Admission(record=True)
    if row.recorded < burst():
        row.recorded += 1
        row.save(update_fields=["recorded"])
        return Admission(record=True)
    row.suppressed += 1
    if approval_id is not None and approval_id not in row.approval_ids:
        row.approval_ids = [*row.approval_ids, approval_id][:MAX_REMEMBERED_REQUESTS]
    row.save(update_fields=["suppressed", "approval_ids"])
    return Admission(record=False, retry_after=max(1, math.ceil((window() - elapsed).total_seconds())))


def flush_closed() -> int:
    """Sweeper: summarise every burst whose window has closed. Returns how many."""
    closed = ExpressionWrapper(Now() - Value(window()), output_field=DateTimeField())
    flushed = 0
    for pk in RefusalWindow.objects.filter(suppressed__gt=0, started_at__lte=closed).values_list("pk", flat=True)[:500]:
        with transaction.atomic():
            row = (
                RefusalWindow.objects.select_for_update()
                .filter(pk=pk, suppressed__gt=0, started_at__lte=closed)
                .annotate(db_now=Now())
                .first()
            )
            if row is None:
                continue
            _summarise(row)
            row.suppressed, row.approval_ids = 0, []
            row.save(update_fields=["suppressed", "approval_ids"])
        flushed += 1
    return flushed


def _locked_row(user: AbstractBaseUser) -> RefusalWindow:
    row = RefusalWindow.objects.select_for_update().filter(user=user).annotate(db_now=Now()).first()
    if row is not None:
        return row
    try:
        with transaction.atomic():
            RefusalWindow.objects.create(user=user, started_at=Now())
    except IntegrityError:  # another process created it first
        pass
    return RefusalWindow.objects.select_for_update().filter(user=user).annotate(db_now=Now()).get()


def _summarise(row: RefusalWindow) -> None:
    ends = row.started_at + window()
    first = ApprovalRequest.objects.filter(pk__in=row.approval_ids[:1]).first()
    audit.record(
        AuditEntry.Kind.REFUSALS_SUPPRESSED,
        request=first,
        actor=row.user,
        suppressed=row.suppressed,
        recorded=row.recorded,
        window_started_at=row.started_at.isoformat(),
        window_ended_at=ends.isoformat(),
        burst=burst(),
        window_seconds=int(window().total_seconds()),
        approval_ids=row.approval_ids,
        reason=(
            f"{row.suppressed} more refused decision attempt(s) by {row.user.get_username()} between "
            f"{row.started_at:%H:%M:%S} and {ends:%H:%M:%S} UTC were answered 429 and not recorded one by one "
            f"(limit: {burst()} in {int(window().total_seconds())} s)"
        ),
    )
