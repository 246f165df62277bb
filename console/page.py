"""The execution page and the executions list as live panels.

One mechanism keeps every screen current: the page holds a *stamp* per panel (a
short hash of exactly what the panel shows), and one poller sends them back every
``DASHBOARD_POLL_MS``. The answer is 204 when nothing changed, or the panels whose
stamp differs (htmx out-of-band swaps) plus a poller carrying the new stamps. The
stamps come from a few small reads (the ``Snapshot``), taken *before* any panel is
rendered, so a panel is never older than its stamp says.

This is screen code: it reads through the runtime's selectors and the approvals
app (the approval card, the inbox count), like the views.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Exists, Max, OuterRef, Subquery
from django.urls import reverse
from django.utils import timezone

from approvals import policy
from approvals import selectors as approval_selectors
from approvals.gate import reused_approvals
from approvals.models import ApprovalRequest
from artifacts.models import ArtifactVersion
from executions import runtime, selectors, services, stuck
from executions.authoring import registry
from executions.models import (
    HOLDABLE,
    MIGRATABLE,
    Action,
    Execution,
    ExecutionEvent,
    ModelCall,
    Status,
    StepRun,
    ref_for,
)
from retention import holds as legal_holds
from triage import drift

from . import chat, graph, presenters

EXECUTION_PANELS = (
    "head",
    "approval",
    "operate",
    "artifact",
    "timeline",
    "ledger",
    "approvals",
    "steps",
    "model_calls",
)
NAV = "nav"
MAX_TOKEN = 600


def digest(*parts: Any) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:10]


def parse_token(raw: str | None) -> dict[str, str]:
    """``head:ab12,ledger:cd34`` → {"head": "ab12", …}; anything malformed reads as "nothing known"."""
    out: dict[str, str] = {}
    for part in (raw or "")[:MAX_TOKEN].split(","):
        name, _, value = part.partition(":")
        if name and value:
            out[name] = value
    return out


def make_token(stamps: dict[str, str]) -> str:
    return ",".join(f"{name}:{value}" for name, value in stamps.items())


def changed_panels(stamps: dict[str, str], token: str | None) -> list[str]:
    held = parse_token(token)
    return [name for name, value in stamps.items() if held.get(name) != value]


# --- the nav's inbox count (every page)


class Nav:
    """The inbox count in the nav, read only when a template or a poll asks."""

    def __init__(self, user: AbstractBaseUser) -> None:
        self.user = user
        self._count: int | None = None

    @property
    def shows_inbox(self) -> bool:
        return bool(getattr(self.user, "is_authenticated", False)) and self.user.has_perm("approvals.decide_approval")

    @property
    def inbox_count(self) -> int:
        if self._count is None:
            self._count = approval_selectors.inbox_count(self.user) if self.shows_inbox else 0
        return self._count

    def stamps(self) -> dict[str, str]:
        return {NAV: digest(self.inbox_count)} if self.shows_inbox else {}

    @property
    def poll_url(self) -> str:
        """The poll of a page without live panels of its own (the nav alone)."""
        return f"{reverse('console:live_nav')}?{urlencode({'stamp': make_token(self.stamps())})}"


def next_inbox_item(user: AbstractBaseUser) -> ApprovalRequest | None:
    """The oldest request still waiting for ``user`` (offered after a decision)."""
    items = approval_selectors.inbox_for(user)
    return items[0].request if items else None


# --- the execution page


@dataclass
class Snapshot:
    """The small reads every stamp of the execution page is computed from."""

    execution: Execution
    last_event_id: int
    last_run_id: int
    last_model_call_id: int
    actions: list[Action]
    requests: list[ApprovalRequest]
    latest_version_id: int | None
    restarted_as: int | None = None  # the execution that restarted this one (triage.restart)
    # Approvals of another execution this one acts on: the decisions a restart reused.
    reused: list[ApprovalRequest] = field(default_factory=list)
    # The children it started (issue 21), annotated with their stuck reasons.
    children: list[Execution] = field(default_factory=list)
    # A failed child's restart, as the parent waits on it (the last of the chain), by the child's pk.
    child_restarts: dict[int, Execution] = field(default_factory=dict)

    @property
    def authorisers(self) -> dict[str, ApprovalRequest]:
        """The approval requests, by the reference the ledger knows them by."""
        return {r.gate_ref: r for r in [*self.reused, *self.requests]}

    @property
    def pending(self) -> ApprovalRequest | None:
        pending = [r for r in self.requests if r.status == ApprovalRequest.State.PENDING]
        return pending[-1] if pending else None


def _last_id(model) -> Subquery:
    """The highest id of ``model``'s rows of the outer execution (NULL: none yet)."""
    rows = model.objects.filter(execution=OuterRef("pk")).order_by().values("execution")
    return Subquery(rows.annotate(m=Max("id")).values("m"))


def snapshot(execution: Execution) -> Snapshot:
    # The marks the stamps compare, in one statement (every open execution page polls this).
    last_event, last_run, last_call, restarted_as, has_children = (
        Execution.objects.filter(pk=execution.pk)
        .annotate(
            last_event=_last_id(ExecutionEvent),
            last_run=_last_id(StepRun),
            last_call=_last_id(ModelCall),
            restart=Subquery(Execution.objects.filter(restarted_from=OuterRef("pk")).order_by().values("id")[:1]),
            # Most executions start none: their page skips the stuck annotation's query (~7 ms to build).
            has_children=Exists(Execution.objects.filter(parent=OuterRef("pk"))),
        )
        .values_list("last_event", "last_run", "last_call", "restart", "has_children")
        .first()
    ) or (None, None, None, None, False)  # purged since it was read (retention): nothing more to mark
    return Snapshot(
        execution=execution,
        last_event_id=last_event or 0,
        last_run_id=last_run or 0,
        last_model_call_id=last_call or 0,
        actions=list(execution.actions.order_by("id")),
        requests=list(
            ApprovalRequest.objects.filter(execution=execution)
            .select_related("artifact_version__artifact", "requested_by", "decision__decided_by")
            .order_by("id")
        ),
        latest_version_id=ArtifactVersion.objects.filter(artifact__execution=execution)
        .order_by("-artifact_id", "-number")
        .values_list("id", flat=True)
        .first(),
        restarted_as=restarted_as,
        reused=list(
            ApprovalRequest.objects.filter(pk__in=reused_approvals(execution))
            .select_related("artifact_version__artifact", "requested_by", "decision__decided_by", "execution")
            .order_by("id")
        ),
        children=(children := list(stuck.annotated().filter(parent=execution).order_by("id")) if has_children else []),
        child_restarts=_restarts_of(children),
    )


def _restarts_of(children: list[Execution]) -> dict[int, Execution]:
    """Each failed child's restart, followed to the last of its chain (a restart that
    failed and was restarted again), annotated with its stuck reason: one query a link,
    none when no child failed."""
    found: dict[int, Execution] = {}
    following = {c.pk: c.pk for c in children if c.status == Status.FAILED}  # the latest pk → the child's
    for _ in range(20):  # a restart chain is short; never loop on a bad record
        if not following:
            break
        later = {}
        for restart in stuck.annotated().filter(restarted_from__in=list(following)):
            child = following[restart.restarted_from_id]
            found[child] = restart
            if restart.status == Status.FAILED:
                later[restart.pk] = child
        following = later
    return found


def family(snap: Snapshot) -> dict[str, Any] | None:
    """The tree on the execution page: its parent (and the step that started it), its
    children with their status and stuck reason; None when it has neither."""
    e = snap.execution
    if not e.parent_id and not snap.children:
        return None
    return {
        "parent": {"ref": ref_for(e.parent_id), "step": e.parent_step} if e.parent_id else None,
        "children": [
            {
                "ref": c.ref,
                "key": c.child_key,
                "step": c.parent_step,
                "workflow": c.workflow,
                "execution": c,
                "stuck": stuck.describe(c),
                "restart": _restart_row(snap.child_restarts.get(c.pk)),
            }
            for c in snap.children
        ],
    }


def _restart_row(restart: Execution | None) -> dict[str, Any] | None:
    if restart is None:
        return None
    return {"ref": restart.ref, "execution": restart, "stuck": stuck.describe(restart)}


def execution_stamps(snap: Snapshot) -> dict[str, str]:
    e = snap.execution
    pending = snap.pending
    # The unresolved actions as their last move left them (with its evidence): never every event of
    # the execution, or a webhook sent beside it would redraw the form an operator is filling in.
    unresolved = [
        (a.key, a.status, a.attempts, a.updated_at)
        for a in snap.actions
        if a.status == Action.State.UNKNOWN or (a.status in _UNRESOLVED and not a.beside)
    ]
    return {
        "head": digest(
            e.status,
            e.status_reason,
            e.current_step,
            e.due_at,
            e.deadline,
            e.lease_owner,
            e.lease_token,
            e.lease_expires_at,
            getattr(e, "stuck_reason", None),
            e.restarted_from_id,
            snap.restarted_as,
            e.hold_at,
            e.budget_usd,
            [(c.pk, c.status, c.current_step, c.stuck_reason) for c in snap.children],
            [(r.pk, r.status, r.current_step, r.stuck_reason) for r in snap.child_restarts.values()],
        ),
        "approval": digest(pending.pk if pending else None, e.status, e.current_step),
        "operate": digest(e.status, e.due_at, unresolved, snap.restarted_as, e.budget_usd, e.hold_at),
        "artifact": digest(snap.latest_version_id),
        "timeline": digest(snap.last_event_id, snap.last_run_id),
        "steps": digest(
            snap.last_run_id,
            snap.last_model_call_id,
            e.status,
            e.current_step,
            e.round,  # the workflow graph's visits
            [(c.pk, c.status) for c in snap.children],  # its children step's count
        ),
        "model_calls": digest(snap.last_model_call_id),
        "ledger": digest(
            e.status,
            e.current_step,
            [
                (
                    a.key,
                    a.status,
                    a.attempts,
                    a.receipt is not None,
                    getattr(snap.authorisers.get(a.gate_ref), "status", ""),
                )
                for a in snap.actions
            ],
            snap.last_event_id if unresolved else 0,
        ),
        "approvals": digest(
            [(r.pk, r.status, bool(approval_row(r).decided_by)) for r in [*snap.reused, *snap.requests]]
        ),
    }


_UNRESOLVED = (Action.State.UNKNOWN, Action.State.EXECUTING)


def _action_events(execution: Execution) -> list[ExecutionEvent]:
    return list(
        ExecutionEvent.objects.filter(execution=execution, type__startswith="action.")
        .only("id", "type", "payload", "actor_label")
        .order_by("id")
    )


@dataclass(frozen=True)
class FormField:
    name: str
    label: str
    pattern: str
    example: str
    max_length: int
    value: str = ""


@dataclass(frozen=True)
class RefusedForm:
    """What was typed into one of the execution page's forms that was refused for it, to
    show again beside ``error``: ``form`` is the form (``signal``, ``answer``, ``budget``,
    ``pause``, ``hold``, ``retry``, ``accept_request``, ``restart``, ``close`` (a
    compensation's, by ``typed["key"]``), ``resolve`` (an unknown outcome's, by
    ``typed["key"]``), ``remind`` or ``redraft``), ``typed`` its fields by their names in
    the form."""

    form: str
    typed: dict[str, str]
    error: str


@dataclass(frozen=True)
class ResolveCard:
    """One unknown outcome and the form that resolves it."""

    row: presenters.LedgerRow
    fields: list[FormField]
    outcome: str = ""  # nothing chosen: the operator says which, never a default
    evidence: str = ""
    error: str = ""


def resolve_cards(rows: list[presenters.LedgerRow], refused: RefusedForm | None) -> list[ResolveCard]:
    """A card for each unknown outcome; the one a refused Resolve form was for (``refused``,
    form ``resolve``) holds what was typed (``receipt.<field>`` for the receipt's) and why."""
    resolving = refused if refused is not None and refused.form == "resolve" else None
    cards = []
    for row in rows:
        if not row.unresolved:
            continue
        typed = resolving.typed if resolving is not None and resolving.typed.get("key") == row.key else {}
        fields = [
            FormField(
                name=f.name,
                label=f.label,
                pattern=f.pattern,
                example=f.example,
                max_length=f.max_length,
                value=typed.get(f"receipt.{f.name}", ""),
            )
            for f in row.fields
        ]
        error = resolving.error if typed and resolving is not None else ""
        cards.append(
            ResolveCard(
                row=row,
                fields=fields,
                outcome=typed.get("outcome", ""),
                evidence=typed.get("evidence", ""),
                error=error,
            )
        )
    return cards


def answer_fields(schema: dict[str, Any], typed: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The form a question's JSON Schema draws: one field a property (a yes/no choice for
    a boolean, a number, a choice of its ``enum``, else text), required where it says so.
    Each field's ``value`` is what ``typed`` (a refused answer, ``answer.<field>``) holds
    for it, else its default (a yes/no starts unchosen)."""
    required = set(schema.get("required", []))
    fields = []
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        kind = prop.get("type")
        widget = (
            "choice"
            if "enum" in prop
            else {"boolean": "yesno", "integer": "number", "number": "number"}.get(kind, "text")
        )
        default = "" if prop.get("default") is None else str(prop.get("default"))
        fields.append(
            {
                "name": name,
                "label": prop.get("title") or name,
                "help": prop.get("description", ""),
                "widget": widget,
                "choices": [str(c) for c in prop.get("enum", [])],
                "required": name in required,
                "value": (typed or {}).get(f"answer.{name}", "" if widget == "yesno" else default),
                "step": "1" if kind == "integer" else "any",
            }
        )
    return fields


def answer_from_form(schema: dict[str, Any], posted: Any) -> dict[str, Any]:
    """The answer a question's form posted (``answer.<field>``), typed as its schema says;
    a field left empty is left out (the schema then says whether it may be). What can't be
    read as its type is kept as posted: the schema's check names the field."""
    answer: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        raw = posted.get(f"answer.{name}", "")
        if raw == "":
            continue
        kind = prop.get("type")
        value: Any = raw
        if kind == "boolean":
            value = {"yes": True, "no": False}.get(raw, raw)
        elif kind in ("integer", "number"):
            try:
                value = int(raw) if kind == "integer" else float(raw)
            except ValueError:
                value = raw
        answer[name] = value
    return answer


def panel_context(
    request,
    snap: Snapshot,
    panels: list[str] | tuple[str, ...],
    *,
    record_view: bool = True,
    refused: RefusedForm | None = None,
) -> dict[str, Any]:
    """What the named panels need. ``record_view``: a decidable approval card rendered
    for this user asks, once shown, to be recorded as ``viewed`` (version and hash).
    ``refused``: a refused form, shown again with its message if the page draws that form
    (``refused`` then holds it under its name; else it is empty; a Resolve form's is on
    its card)."""
    user = request.user
    execution = snap.execution
    ctx: dict[str, Any] = {"execution": execution, "label": selectors.step_label(execution)}
    # An operator of this workflow (the role, and access by workflow: KEEL_WORKFLOW_ACCESS).
    operator = user.has_perm(services.OPERATE) and runtime.may(user, "operate", execution.workflow)
    ctx["can_cancel"] = not execution.is_terminal and (operator or execution.created_by_id == user.pk)
    ctx["can_resume"] = execution.status in (Status.NEEDS_ATTENTION, Status.PAUSED) and operator
    ctx["can_pause"] = execution.status in HOLDABLE and operator
    ctx["can_retry"] = execution.status == Status.RETRY_PENDING and operator
    # Another registered version it could move to (triage.migration): the newest one, previewed first.
    newer = [v for v in registry.versions(execution.workflow) if v > execution.workflow_version]
    ctx["migrate_to"] = max(newer) if newer and operator and execution.status in MIGRATABLE else None
    drifted = drift.drift_of(execution) if execution.status == Status.NEEDS_ATTENTION else None
    ctx["drift"] = presenters.drift_card(drifted) if drifted is not None else None
    ctx["can_accept_request"] = drifted is not None and operator and not drifted.accepted
    ctx["can_resolve"] = execution.status == Status.NEEDS_ATTENTION and operator
    ctx["waiting"] = runtime.pending_of(execution) if execution.status == Status.WAITING else None
    ctx["can_signal"] = ctx["can_cancel"] and ctx["waiting"] is not None and ctx["waiting"].kind == "wait"
    # A tool's provider asked a question mid-call: the requester and operators answer it here.
    ctx["can_answer"] = ctx["can_cancel"] and ctx["waiting"] is not None and ctx["waiting"].kind == "input"
    answered = refused.typed if refused is not None and refused.form == "answer" else None
    ctx["answer_fields"] = answer_fields(ctx["waiting"].details["schema"], answered) if ctx["can_answer"] else []
    # Restart a failed execution from a step; close the compensations a cancel recorded.
    ctx["can_restart"] = execution.status == Status.FAILED and operator and snap.restarted_as is None
    ctx["restart"] = presenters.restart_form(execution) if ctx["can_restart"] else None
    ctx["can_close"] = execution.status == Status.CANCELLED and operator
    ctx["restarted_from"] = ref_for(execution.restarted_from_id) if execution.restarted_from_id else ""
    ctx["restarted_as"] = ref_for(snap.restarted_as) if snap.restarted_as else ""
    # Its trace (executions.engine.tracing), shown once traces are exported or a viewer is linked.
    traced = settings.TRACING or settings.KEEL_TRACE_URL
    ctx["trace_id"] = runtime.trace_id_of(execution) if traced else ""
    ctx["trace_url"] = runtime.trace_url(execution, settings.KEEL_TRACE_URL)
    ctx["signal_event_id"] = uuid.uuid4().hex
    if chat.is_chat(execution):  # a conversation: its turns, and a message box while it waits
        ctx["chat_turns"] = chat.turns(execution)
        ctx["can_chat"], ctx["can_signal"] = ctx["can_signal"], False  # its message box sends both signals
    # Raise the budget of a live execution that has one (on one without, the service would
    # set a cap, not raise one); place or release a legal hold (auditors), whatever its status.
    ctx["can_budget"] = operator and not execution.is_terminal and execution.budget_usd is not None
    ctx["can_hold"] = user.has_perm(legal_holds.HOLD)
    ledger_rows = None
    if {"ledger", "operate"} & set(panels):
        ledger_rows = presenters.ledger_rows(execution, snap.actions, _action_events(execution), snap.authorisers)
        ctx["ledger"] = ledger_rows
        ctx["resolve_cards"] = resolve_cards(ledger_rows, refused)
    if "head" in panels:
        ctx["input_items"] = input_items(execution.input)
        triage = selectors.triage_fields(execution)
        ctx["triage"] = triage
        ctx["now"] = timezone.now()
        ctx["lease_beat"] = max(1, settings.RUNTIME_LEASE_SECONDS // 3)
        ctx["stuck"] = triage["stuck"]
        # child_failed with action restart: the children to restart, linked from the suggestion.
        children_to_restart = (triage["stuck"] or {}).get("reason") == "child_failed"
        described = stuck.describe(execution) if children_to_restart else None
        ctx["stuck_targets"] = described.targets if described else ()
        ctx["family"] = family(snap)
        ctx["cost"] = selectors.cost_payload(execution)
        if execution.status == Status.COMPLETED:  # what it produced (Workflow.result)
            ctx["result_json"] = presenters.pretty_json(selectors.result_of(execution))
        ctx["notes"] = presenters.notes_view(execution)
    if "approval" in panels:
        ctx.update(approval_context(user, snap, record_view=record_view))
    if "steps" in panels:
        runs = list(StepRun.objects.filter(execution=execution).order_by("id"))
        ctx["attempts"] = presenters.attempt_rows(execution, runs)
        calls = ModelCall.objects.filter(execution=execution, step=execution.current_step, round=execution.round)
        ctx["step_in_progress"] = presenters.step_in_progress(execution, runs, calls.count())
        succeeded = [(r.step, r.round) for r in runs if r.outcome == StepRun.Outcome.SUCCEEDED]
        ctx["graph"] = graph.graph_for(execution, children=snap.children, requests=snap.requests, runs=succeeded)
    if "model_calls" in panels:
        calls = ModelCall.objects.filter(execution=execution).order_by("id")
        ctx["model_calls"] = presenters.model_call_rows(calls)
    if "timeline" in panels:
        events = ExecutionEvent.objects.filter(execution=execution).order_by("-id")
        runs = StepRun.objects.filter(execution=execution, outcome=StepRun.Outcome.SUCCEEDED).order_by("-id")
        ctx["timeline"] = presenters.timeline_rows(execution, events, runs)
    if "approvals" in panels:
        ctx["approval_rows"] = [approval_row(r, home=execution) for r in [*snap.reused, *snap.requests]]
    if "artifact" in panels:
        versions = list(selectors.artifact_versions(execution).order_by("artifact_id", "number"))
        ctx["versions"] = versions
        ctx["latest"] = next((v for v in versions if v.pk == snap.latest_version_id), None)
    named = refused.typed.get("key") if refused is not None and refused.form in ("close", "resolve") else None
    drawn = {
        "signal": ctx["can_signal"],
        "answer": ctx["can_answer"],
        "budget": ctx["can_budget"],
        "pause": ctx["can_pause"],
        "hold": ctx["can_hold"] and execution.hold_at is None,  # the form that places one
        "retry": ctx["can_retry"],
        "accept_request": ctx["can_accept_request"],
        "restart": ctx["can_restart"] and bool(ctx["restart"].choices),
        "close": ctx["can_close"] and any(r.open_compensation and r.key == named for r in ledger_rows or ()),
        "resolve": ctx["can_resolve"] and any(c.row.key == named for c in ctx.get("resolve_cards", ())),
        "remind": ctx.get("can_remind", False),  # the approval card's (``approval_context``)
        "redraft": ctx.get("can_redraft", False),
    }
    ctx["refused"] = {refused.form: refused} if refused is not None and drawn[refused.form] else {}
    if "restart" in ctx["refused"]:  # the step as it was chosen, while the form offers it
        chosen = refused.typed.get("from_step")
        if any(c.name == chosen for c in ctx["restart"].choices):
            choices = [replace(c, selected=c.name == chosen) for c in ctx["restart"].choices]
            ctx["restart"] = replace(ctx["restart"], choices=choices)
    return ctx


def approval_context(user: AbstractBaseUser, snap: Snapshot, *, record_view: bool) -> dict[str, Any]:
    approval = snap.pending
    execution = snap.execution
    is_open = approval is not None and approval_selectors.is_open(approval)
    can_decide = is_open and policy.can_decide(user, approval)
    operates = user.has_perm(services.OPERATE) and runtime.may(user, "operate", snap.execution.workflow)
    event_id = uuid.uuid4().hex
    return {
        "approval": approval,
        "approval_open": is_open,
        "approval_closed_why": approval_selectors.not_open_because(approval) if approval and not is_open else "",
        "can_decide": can_decide,
        "reject_continues_at": approval_selectors.reject_continues_at(approval) if can_decide else "",
        # Operators who can't decide it remind those who can (notifications.remind).
        "can_remind": is_open and not can_decide and operates and settings.KEEL_NOTIFICATIONS,
        "can_redraft": approval is not None and (operates or execution.created_by_id == user.pk),
        "event_id": event_id,
        # Shown to a person who may decide it, the card says it was seen (approvals' viewed
        # endpoint, a POST once it is on screen): rendering itself never writes the audit.
        "record_view": can_decide and record_view,
        # Between versions (changes requested, a redraft): the next one will appear here.
        "approval_expected": approval is None and _draft_coming(execution, snap.requests),
        "next_inbox": lambda: next_inbox_item(user),
    }


# The last request ended so that a new version is being drafted for a new one.
_REDRAFTED = (ApprovalRequest.State.CHANGES_REQUESTED, ApprovalRequest.State.SUPERSEDED)
_ON_ITS_WAY = (Status.PENDING, Status.RUNNING, Status.RETRY_PENDING)


def _draft_coming(execution: Execution, requests: list[ApprovalRequest]) -> bool:
    """A new version to decide on is being drafted: the last request was sent back (or
    superseded by a redraft) and the execution is on its way to the gate again; or it
    parks at the gate and the request is about to be read."""
    if execution.status == Status.AWAITING_APPROVAL:
        return True
    return bool(requests) and requests[-1].status in _REDRAFTED and execution.status in _ON_ITS_WAY


@dataclass(frozen=True)
class ApprovalRow:
    pk: int
    action: str
    version: int
    sha256: str
    status: str
    status_label: str
    decided_by: str = ""
    decided_at: Any = None
    comment: str = ""
    recorded_by: str = ""  # the execution it belongs to, when a restart reuses it


def approval_row(request: ApprovalRequest, *, home: Execution | None = None) -> ApprovalRow:
    decision = approval_selectors.decision_of(request)
    return ApprovalRow(
        pk=request.pk,
        action=request.action,
        version=request.version,
        sha256=request.content_sha256,
        status=request.status,
        status_label=request.get_status_display().lower(),
        decided_by=decision.approver if decision else "",
        decided_at=decision.created_at if decision else None,
        comment=decision.comment if decision else "",
        recorded_by=ref_for(request.execution_id) if home is not None and request.execution_id != home.pk else "",
    )


def input_items(data: Any) -> list[presenters.Item]:
    if not isinstance(data, dict):
        return []
    out = []
    for key in sorted(data):
        value = data[key]
        if value in (None, "", [], {}):
            continue
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            out.append(presenters.Item(key, "; ".join(value)))
        else:
            out.append(presenters.Item(key, presenters._clip(value), code=True))
    return out


# --- the list


def list_stamps(rows: list[Execution]) -> dict[str, str]:
    return {
        "rows": digest([(e.pk, e.status, e.current_step, e.updated_at, getattr(e, "stuck_reason", None)) for e in rows])
    }


@dataclass(frozen=True)
class ListRow:
    """One execution in the triage list: where it is, why it is not moving, for how long."""

    execution: Execution
    label: str
    stuck: Any  # executions.stuck.Stuck or None
    attempt: dict | None
    due_at: Any
    lease_owner: str
    restarted_as: str = ""  # the execution that restarted this failed one


def list_rows(executions: list[Execution]) -> list[ListRow]:
    """The list's rows, with each failed execution's restart (one query for the page)."""
    restarts = dict(Execution.objects.filter(restarted_from__in=executions).values_list("restarted_from_id", "pk"))
    return [list_row(e, restarted_as=ref_for(restarts[e.pk]) if e.pk in restarts else "") for e in executions]


def list_row(execution: Execution, *, restarted_as: str = "") -> ListRow:
    triage = selectors.triage_fields(execution)
    described = stuck.describe(execution, max_attempts=(triage["attempt"] or {}).get("max"))
    return ListRow(
        execution=execution,
        label=selectors.step_label(execution),
        stuck=described,
        attempt=triage["attempt"],
        due_at=triage["due_at"],
        lease_owner=(triage["lease"] or {}).get("owner", ""),
        restarted_as=restarted_as,
    )


@dataclass(frozen=True)
class CountLink:
    label: str
    n: int
    query: str  # the list's query string for it
    kind: str  # status | reason


def count_links(counts: dict[str, dict[str, int]]) -> list[CountLink]:
    """The counts at the top of the list, as links to the filtered list (non-zero ones)."""
    labels = dict(Status.choices)
    links = [CountLink(labels[s], n, urlencode({"status": s}), "status") for s, n in counts["by_status"].items() if n]
    links += [
        CountLink(r.replace("_", " "), n, urlencode({"reason": r}), "reason")
        for r, n in counts["by_reason"].items()
        if n
    ]
    return links
