"""What happened after a decision: the effects it unlocked and how each one ended;
and, apart from them, who was told about the request (``after_request``).

Read from the ledger (``Action`` rows) and the execution's ``action.*`` events: the
receipt's identifiers (publication, order, notification ids), whether the outcome
was reconciled by a lookup, the lookup's evidence when it could not be established,
and an operator's resolution with its evidence. ``action_state`` is the one wording
of an action's state, here and on the execution's ledger (``console.presenters``):
"outcome unknown", "retrying (attempt 2 did not succeed)", "not run: approval
superseded — never sent" — never "failed" for an effect that never started or that
waits for its next attempt.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

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
    tone: str  # ok, info, warn, danger or neutral: the badge's colour
    attempts: int
    authorised: bool  # unlocked by this request's decision (not a later step's effect)
    beside: bool = False  # an e-mail or webhook telling of the execution, sent beside its steps
    at: dt.datetime | None = None  # when its state last changed: sent, refused, given up
    # A beside row only: to whom (the address) or where (the receiver's host) it went, and
    # what it told (the e-mail's subject, the webhook's event).
    told_to: str = ""
    told_of: str = ""
    receipt: list[tuple[str, str]] = field(default_factory=list)
    error: str = ""
    lookup: list[tuple[str, str]] = field(default_factory=list)
    reconciled: bool = False
    resolution: Resolution | None = None
    # The execution that sent it, when it isn't the request's own: a restart that reused
    # the decision (triage.restart) sends its effects under it.
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


@dataclass(frozen=True)
class ActionState:
    """How an action reads on a page as things stand now: the same words on the
    execution's ledger (console) and in the approval history (here)."""

    label: str
    tone: str  # ok, info, warn, danger or neutral: the badge's colour
    note: str = ""  # a line that says more, when there is one


# An effect that was never sent, by what became of the approval request that guarded it.
NEVER_SENT = {
    ApprovalRequest.State.SUPERSEDED: ("approval superseded", "a newer version replaced the one it was planned for"),
    ApprovalRequest.State.WITHDRAWN: ("approval withdrawn", "the execution was cancelled before it ran"),
    ApprovalRequest.State.REJECTED: ("approval rejected", "the manager rejected it"),
    ApprovalRequest.State.CHANGES_REQUESTED: ("changes requested", "a new version was asked for"),
    ApprovalRequest.State.EXPIRED: ("approval expired", "nobody decided in time"),
}


def action_state(
    action: Action,
    execution: Execution,
    *,
    authoriser: ApprovalRequest | None = None,
    resolved_by: str = "",
    reconciled: bool = False,
) -> ActionState:
    """``action`` in words, as it stands with ``execution`` where it is now: never
    "failed" for an effect that never started or that waits for its next attempt.
    ``authoriser``: the request that guards it; ``resolved_by``: the operator who
    established its outcome; ``reconciled``: a lookup found it done."""
    state, status = Action.State, action.status
    here = execution.current_step == action.step
    if action.is_compensation:
        if status == state.PLANNED:
            return ActionState(
                "compensation — to be carried out by a person", "warn", f"what to undo: {_shown(action.args)}"
            )
        if status == state.SUCCEEDED:
            return ActionState("compensation carried out", "ok")
        return ActionState("compensation not possible", "danger", action.last_error)
    if status == state.SUCCEEDED:
        if resolved_by:
            return ActionState(f"succeeded (resolved by {resolved_by})", "ok")
        return ActionState("succeeded (found by lookup)" if reconciled else "succeeded", "ok")
    if status == state.PLANNED:
        return ActionState("planned — waits for approval", "info")
    if status == state.APPROVED:
        return ActionState("approved — not sent yet", "info")
    retrying = execution.status == Status.RETRY_PENDING and here
    if status == state.UNKNOWN:
        if retrying:
            return ActionState("outcome unknown — looked up again at the next attempt", "warn")
        if execution.status == Status.NEEDS_ATTENTION:
            return ActionState("outcome unknown — an operator must establish it", "warn")
        return ActionState("outcome unknown", "warn")
    if retrying:  # executing or failed, and its step waits for the next attempt
        return ActionState(f"retrying (attempt {action.attempts} did not succeed)", "warn", action.last_error)
    if status == state.EXECUTING:
        if execution.status == Status.RUNNING and here:
            return ActionState("sending", "info")
        return ActionState("in flight — outcome not recorded yet", "warn")
    if resolved_by:
        return ActionState(f"failed (resolved by {resolved_by})", "danger", action.last_error)
    if action.attempts == 0:  # failed before it was ever sent
        if authoriser is not None and authoriser.status in NEVER_SENT:
            why, note = NEVER_SENT[authoriser.status]
            return ActionState(f"not run: {why} — never sent", "neutral", note)
        if execution.status == Status.CANCELLED:
            return ActionState("not run: cancelled — never sent", "neutral", action.last_error)
        return ActionState("not run", "neutral", action.last_error)
    return ActionState("failed", "danger", action.last_error)


def _shown(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _authorisers(actions: Iterable[Action]) -> dict[str, ApprovalRequest]:
    """The approval requests that guard ``actions``, by ``Action.gate_ref`` (one query)."""
    ids = {request_id_from(a.gate_ref) for a in actions if a.gate_ref}
    ids.discard(None)
    return {r.gate_ref: r for r in ApprovalRequest.objects.filter(pk__in=ids)} if ids else {}


def _told(action: Action) -> tuple[str, str]:
    """(to whom or where, what) for a beside action, read from its arguments: an e-mail's
    ``to`` and ``subject``, a webhook's receiver and ``event``. A webhook's receiver is
    its host alone: the path and query of a hook's URL often carry its secret."""
    if not action.beside or not isinstance(action.args, dict):
        return "", ""
    args = action.args
    body = args.get("body")
    what = str(args.get("subject") or (body.get("event") if isinstance(body, dict) else "") or "")
    if args.get("to"):
        return str(args["to"]), what
    receipt = action.receipt if isinstance(action.receipt, dict) else {}
    url = receipt.get("url") or args.get("url")
    return (_host(url) if isinstance(url, str) else ""), what


def _host(url: str) -> str:
    """A URL's host (and port) alone, never its credentials, path or query ("" if unreadable)."""
    try:
        return urlsplit(url).netloc.rpartition("@")[2]
    except ValueError:
        return ""


_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.IGNORECASE)


def hosts_only(text: str) -> str:
    """``text`` with every URL in it cut to its host: a webhook's error quotes the hook's
    URL, whose path and query often carry its secret."""
    return _URL.sub(lambda m: _host(m.group(0)) or "a URL", text)


def _outcomes(
    actions: list[Action],
    events: Iterable[ExecutionEvent],
    authorised_by: int | None,
    authorisers: dict[str, ApprovalRequest],
    home: int | None = None,
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
        worded = action_state(
            action,
            action.execution,
            authoriser=authorisers.get(action.gate_ref),
            resolved_by=resolution.by if resolution is not None else "",
            reconciled=action.key in reconciled,
        )
        wording = worded.label
        sent_by = action.execution.ref if home is not None and action.execution_id != home else ""
        if sent_by:
            restarted = " (a restart, reusing this decision)" if action.execution.restarted_from_id else ""
            wording = f"{wording} in {sent_by}{restarted}"
        told_to, told_of = _told(action)
        out.append(
            EffectOutcome(
                key=action.key,
                type=action.type,
                status=action.status,
                wording=wording,
                tone=worded.tone,
                attempts=action.attempts,
                authorised=authorised_by is not None and action.gate_ref == gate_ref_for(authorised_by),
                receipt=receipt_fields(action.receipt),
                error=hosts_only(action.last_error) if action.beside else action.last_error,
                lookup=lookups.get(action.key, []) if action.status != Action.State.SUCCEEDED or resolution else [],
                reconciled=action.key in reconciled,
                resolution=resolution,
                sent_by=sent_by,
                beside=action.beside,
                at=action.updated_at,
                told_to=told_to,
                told_of=told_of,
            )
        )
    return out


def _action_events(actions: Iterable[Action]) -> list[ExecutionEvent]:
    """The ledger events of ``actions``, read through their executions' events (the index
    on the execution), never a scan of every execution's history."""
    actions = list(actions)
    if not actions:
        return []
    executions = {a.execution_id for a in actions}
    return list(
        ExecutionEvent.objects.filter(
            execution_id__in=executions, type__startswith="action.", payload__key__in=[a.key for a in actions]
        )
        .select_related("actor")
        .order_by("id")
    )


@dataclass(frozen=True)
class AfterRequest:
    """What followed one approval request, as its pages show it: two lists, never a row in both."""

    effects: list[EffectOutcome]  # the workflow's own: what the decision unlocked, then later steps'
    told: list[EffectOutcome]  # e-mails and webhooks about it, sent beside the steps (``Action.beside``)


def _told_about(key: str) -> int | None:
    """The request a beside action's key is about: ``approval:12:notify:…`` → 12; None otherwise."""
    return request_id_from(":".join(key.split(":", 2)[:2]))


def after_request(request: ApprovalRequest, *, window: Iterable[ExecutionEvent]) -> AfterRequest:
    """The one reading of what followed ``request``, for the approval page and the audit story.

    ``effects``: the ones its decision unlocked, then the later ones in its window.
    ``told``: the beside actions keyed under it (``{gate_ref}:…``, as the notifications
    app keys what it sends about a request, ``notifications.planning.notify_key``), sent
    before or after the decision, and those in its window keyed under no request (a
    webhook telling of the execution's end); never one about another request.
    ``window`` is the execution's events from this request until the next request
    (``selectors.event_window``): an action counts when an event in it names its key.
    """
    keys = {ev.payload.get("key") for ev in window if ev.type.startswith("action.") and ev.payload.get("key")}
    home = Q(execution_id=request.execution_id)
    actions = [
        a
        for a in Action.objects.filter(
            Q(gate_ref=request.gate_ref)
            | (home & Q(key__in=keys))
            | (home & Q(beside=True, key__startswith=f"{request.gate_ref}:"))
        )
        .select_related("execution")
        .order_by("id")
        if not a.beside or _told_about(a.key) in (None, request.pk)
    ]
    actions.sort(key=lambda a: (a.gate_ref != request.gate_ref, a.pk))
    rows = _outcomes(actions, _action_events(actions), request.pk, _authorisers(actions), home=request.execution_id)
    return AfterRequest(effects=[r for r in rows if not r.beside], told=[r for r in rows if r.beside])


def authorised_effects(requests: Iterable[ApprovalRequest]) -> dict[int, list[EffectOutcome]]:
    """For a page of requests: the effects each one's decision unlocked (two queries)."""
    requests = list(requests)
    homes = {r.pk: r.execution_id for r in requests}
    refs = [gate_ref_for(pk) for pk in homes]
    actions = list(Action.objects.filter(gate_ref__in=refs).select_related("execution").order_by("id"))
    by_request: dict[int, list[Action]] = defaultdict(list)
    for action in actions:
        pk = request_id_from(action.gate_ref)
        assert pk is not None, "an approval's reference (the filter above)"
        by_request[pk].append(action)
    events = _action_events(actions)
    authorisers = {r.gate_ref: r for r in requests}
    return {pk: _outcomes(rows, events, pk, authorisers, home=homes[pk]) for pk, rows in by_request.items()}
