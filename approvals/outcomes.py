"""What happened after a decision: the effects it unlocked and how each one ended.

Read from the ledger (``Action`` rows) and the execution's ``action.*`` events: the
receipt's identifiers (publication, order, notification ids), whether the outcome
was reconciled by a lookup, the lookup's evidence when it could not be established,
and an operator's resolution with its evidence. Worded as it is: "outcome unknown",
"retrying", "not run: approval 4 superseded" — never "failed" for an effect that
never started or that waits for its next attempt.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from executions.models import Action, Execution, ExecutionEvent, Status

from .models import ApprovalRequest, gate_ref_for, request_id_from


@dataclass(frozen=True)
class Resolution:
    by: str
    at: dt.datetime
    outcome: str
    evidence: str


@dataclass(frozen=True)
class EffectOutcome:
    key: str
    type: str
    status: str  # the ledger's own status
    wording: str  # how it reads on a page
    tone: str  # ok, warn, bad or neutral: the badge's colour
    attempts: int
    authorised: bool  # unlocked by this request's decision (not a later step's effect)
    receipt: list[tuple[str, str]] = field(default_factory=list)
    error: str = ""
    lookup: list[tuple[str, str]] = field(default_factory=list)
    reconciled: bool = False
    resolution: Resolution | None = None
    # The execution that sent it, when it isn't the request's own: a restart that reused
    # the decision (executions.restart) sends its effects under it.
    sent_by: str = ""


RECEIPT_FIELDS = ("status", "reference")


def receipt_fields(receipt: Any) -> list[tuple[str, str]]:
    """The identifiers a person looks for in a provider's receipt: ``*_id``, status, reference.

    Read from the dict in Python, never by template attribute lookup: a receipt may
    have keys such as ``items`` or ``keys`` that collide with dict methods.
    """
    if not isinstance(receipt, dict):
        return []
    out = []
    for name, value in receipt.items():
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            continue
        if name.endswith("_id") or name in RECEIPT_FIELDS:
            out.append((str(name), str(value)))
    return out


def _lookup_fields(evidence: Any) -> list[tuple[str, str]]:
    if not isinstance(evidence, dict):
        return [("evidence", str(evidence))] if evidence else []
    return [(str(k), str(v)) for k, v in evidence.items() if k != "found" and v not in (None, "")]


def _wording(action: Action, execution: Execution, resolution: Resolution | None, reconciled: bool) -> tuple[str, str]:
    state = Action.State
    if action.status == state.SUCCEEDED:
        if resolution is not None:
            return f"succeeded (resolved by {resolution.by})", "ok"
        return ("succeeded (found by lookup)" if reconciled else "succeeded"), "ok"
    if action.status == state.UNKNOWN:
        return "outcome unknown", "warn"
    waiting_to_retry = execution.status == Status.RETRY_PENDING and execution.current_step == action.step
    if action.status in (state.FAILED, state.EXECUTING) and waiting_to_retry:
        return f"retrying (attempt {action.attempts} did not succeed)", "warn"
    if action.status == state.FAILED:
        if resolution is not None:
            return f"failed (resolved by {resolution.by})", "bad"
        if action.attempts == 0:
            return f"not run: {action.last_error}" if action.last_error else "not run", "neutral"
        return "failed", "bad"
    if action.status == state.EXECUTING:
        return "in progress", "warn"
    if action.status == state.APPROVED:
        return "approved, not started yet", "neutral"
    return "planned: waits for the decision", "neutral"


def _outcomes(
    actions: list[Action], events: Iterable[ExecutionEvent], authorised_by: int | None, home: int | None = None
) -> list[EffectOutcome]:
    """``home``: the execution the request belongs to; an action of another one is named."""
    resolutions: dict[str, Resolution] = {}
    reconciled: set[str] = set()
    lookups: dict[str, list[tuple[str, str]]] = {}
    for ev in events:
        key = ev.payload.get("key")
        if ev.payload.get("resolved"):
            who = ev.actor.get_username() if ev.actor is not None else ev.actor_label
            resolutions[key] = Resolution(
                by=who, at=ev.created_at, outcome=ev.payload.get("to", ""), evidence=str(ev.payload.get("evidence", ""))
            )
        if ev.payload.get("reconciled"):
            reconciled.add(key)
        if ev.type == "action.unknown" and ev.payload.get("evidence") is not None:
            lookups[key] = _lookup_fields(ev.payload["evidence"])  # the latest lookup wins
    out = []
    for action in actions:
        resolution = resolutions.get(action.key)
        wording, tone = _wording(action, action.execution, resolution, action.key in reconciled)
        sent_by = action.execution.ref if home is not None and action.execution_id != home else ""
        if sent_by:
            restarted = " (a restart, reusing this decision)" if action.execution.restarted_from_id else ""
            wording = f"{wording} in {sent_by}{restarted}"
        out.append(
            EffectOutcome(
                key=action.key,
                type=action.type,
                status=action.status,
                wording=wording,
                tone=tone,
                attempts=action.attempts,
                authorised=authorised_by is not None and action.gate_ref == gate_ref_for(authorised_by),
                receipt=receipt_fields(action.receipt),
                error=action.last_error,
                lookup=lookups.get(action.key, []) if action.status != Action.State.SUCCEEDED or resolution else [],
                reconciled=action.key in reconciled,
                resolution=resolution,
                sent_by=sent_by,
            )
        )
    return out


def _action_events(keys: Iterable[str]) -> list[ExecutionEvent]:
    keys = list(keys)
    if not keys:
        return []
    return list(
        ExecutionEvent.objects.filter(type__startswith="action.", payload__key__in=keys)
        .select_related("actor")
        .order_by("id")
    )


def effects_after(request: ApprovalRequest, *, window: Iterable[ExecutionEvent]) -> list[EffectOutcome]:
    """The effects this request's decision unlocked, then the later ones in its window.

    ``window`` is the execution's events from this request until the next request
    (``selectors.approval_story``'s window): an effect counts when an event in it
    names its key.
    """
    keys = {ev.payload.get("key") for ev in window if ev.type.startswith("action.") and ev.payload.get("key")}
    actions = list(
        Action.objects.filter(Q(gate_ref=request.gate_ref) | Q(execution_id=request.execution_id, key__in=keys))
        .select_related("execution")
        .order_by("id")
    )
    actions.sort(key=lambda a: (a.gate_ref != request.gate_ref, a.pk))
    return _outcomes(
        actions, _action_events(a.key for a in actions), authorised_by=request.pk, home=request.execution_id
    )


def authorised_effects(requests: Iterable[ApprovalRequest]) -> dict[int, list[EffectOutcome]]:
    """For a page of requests: the effects each one's decision unlocked (two queries)."""
    homes = {r.pk: r.execution_id for r in requests}
    refs = [gate_ref_for(pk) for pk in homes]
    actions = list(Action.objects.filter(gate_ref__in=refs).select_related("execution").order_by("id"))
    by_request: dict[int, list[Action]] = defaultdict(list)
    for action in actions:
        by_request[request_id_from(action.gate_ref)].append(action)
    events = _action_events(a.key for a in actions)
    return {pk: _outcomes(rows, events, authorised_by=pk, home=homes[pk]) for pk, rows in by_request.items()}
