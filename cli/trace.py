"""What an act of the command line leaves in the record besides the act itself.

``--as USER`` acts with that user's authority and is recorded as that user, exactly as the
API would record them; ``record`` then appends, beside every event the act wrote with that
user as its actor, a ``via.cli`` marker (``triage.operator_audit.VIA_CLI``: payload
``{"event": <its id>, "command": <the keel command>}``), so the execution's history and
the operator audit (``via: "cli"``) show the act came from a shell, not the API or a
screen. Events are append-only, so the mark is a row of its own, as a bulk item's is.

``manage.py keel`` runs an act and its marks in one transaction (``acting``): the act's
events and their marks commit together or not at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Max

from executions.models import ExecutionEvent
from triage.operator_audit import VIA_CLI


@contextmanager
def acting(*, user: AbstractBaseUser, command: str) -> Iterator[None]:
    """Run the body (one act of ``user``) in a transaction; on success, mark every event it
    wrote with ``user`` as the actor (``record``) in the same transaction."""
    with transaction.atomic():
        before = ExecutionEvent.objects.aggregate(last=Max("id"))["last"] or 0
        yield
        record(user=user, command=command, after=before)


def record(*, user: AbstractBaseUser, command: str, after: int) -> int:
    """Append a ``via.cli`` marker beside each event of ``user`` with an id above ``after``
    (the act's, read inside its transaction); how many."""
    acts = ExecutionEvent.objects.filter(id__gt=after, actor=user).exclude(type=VIA_CLI).order_by("id")
    marks = [
        ExecutionEvent(
            execution_id=event.execution_id,
            type=VIA_CLI,
            step=event.step,
            actor=user,
            actor_label=f"user:{user.get_username()}",
            payload={"event": event.pk, "command": command, "type": event.type},
        )
        for event in acts.only("id", "execution_id", "step", "type")
    ]
    ExecutionEvent.objects.bulk_create(marks)
    return len(marks)
