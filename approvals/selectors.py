"""Reads for approvals: who may decide what, the managers' inbox, the audit history and story.

``policy.refusal`` / ``policy.can_decide`` hold the one rule for "may this person decide this
request" (authority only: permission, group, separation of duties). Whether the
request can still be decided (pending, unexpired, the execution awaiting it) is a
separate question, answered by ``is_open`` here and enforced by
``approvals.services.approval_decide``.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, F, Q, QuerySet, Value
from django.utils import timezone

from executions.authoring import Template, registry
from executions.models import ExecutionEvent, Status
from executions.runtime import TOOL_CALL_ARTIFACT_KIND, recorded_results
from executions.storable import text_refusal

from . import policy
from .models import ApprovalRequest, ApprovalTombstone, AuditEntry, Decision
from .outcomes import receipt_fields

HISTORY_PAGE_SIZE = 50
EXPIRES_SOON = dt.timedelta(hours=1)
NO_DECISION = "none"
DECISION_FILTERS = (*Decision.Verdict.values, NO_DECISION)


# --- Whether it can still be decided ----------------------------------------------


def is_open(request: ApprovalRequest, *, now: dt.datetime | None = None) -> bool:
    """Can a decision still be taken on it: pending, unexpired, the execution awaiting it."""
    now = now or timezone.now()
    execution = request.execution
    return (
        request.is_pending
        and (request.expires_at is None or request.expires_at > now)
        and execution.status == Status.AWAITING_APPROVAL
        and execution.current_step == request.step
    )


def earlier_decisions(approval: ApprovalRequest) -> list[Decision]:
    """The decisions on earlier versions of ``approval``'s artifact in its execution (a
    rejection that sent it back to a redraft, changes requested), oldest first: what an
    approver of the new version reads to see whether it answers them."""
    return list(
        Decision.objects.filter(
            request__execution_id=approval.execution_id,
            request__artifact_version__artifact_id=approval.artifact_version.artifact_id,
            request__version__lt=approval.version,
        )
        .select_related("request", "decided_by")
        .order_by("request__version", "request_id")
    )


def gate_spec(request: ApprovalRequest, *, execution: Any = None) -> Any:
    """The spec of the gate step ``request`` was asked at, in its execution's pinned version
    (None when this process doesn't have it): what a decision does (``on_reject``,
    ``redraft_from``), read once for the service that decides and the pages that say it."""
    execution = execution or request.execution
    try:
        return registry.get(execution.workflow, execution.workflow_version).get_step(request.step).spec
    except (registry.UnknownWorkflow, KeyError):
        return None


def reject_continues_at(approval: ApprovalRequest) -> str:
    """The label of the step a reject of ``approval`` goes on at (its gate's ``on_reject``),
    or "" when a reject ends the execution (cancels it): what every page offering Reject
    says it does."""
    target = getattr(gate_spec(approval), "on_reject", None)
    if not target:
        return ""
    execution = approval.execution
    return registry.get(execution.workflow, execution.workflow_version).label_for(target)


def not_open_because(request: ApprovalRequest, *, now: dt.datetime | None = None) -> str:
    """Why a pending ``request`` can't be decided now, as the sentence the pages show
    (empty when it is open). A paused execution keeps its request pending: resume
    returns it to awaiting_approval, where the request is decidable again unless its
    expiry (which keeps running) passed meanwhile."""
    now = now or timezone.now()
    execution = request.execution
    expires = request.expires_at
    if expires is not None and expires <= now:
        return f"it expired at {expires:%Y-%m-%d %H:%M:%S} UTC"
    if execution.status == Status.PAUSED and execution.paused_from == Status.AWAITING_APPROVAL:
        paused = (
            ExecutionEvent.objects.filter(execution=execution, type="transition", to_status=Status.PAUSED)
            .select_related("actor")
            .order_by("-id")
            .first()
        )
        if execution.paused_by_workflow:
            who = f"its workflow's kill switch ({execution.workflow})"
        elif paused is not None and paused.actor is not None:
            who = paused.actor.get_username()
        else:
            who = "an operator"
        when = f" at {paused.created_at:%Y-%m-%d %H:%M:%S} UTC" if paused is not None else ""
        why = f": “{execution.status_reason}”" if execution.status_reason else ""
        lapse = (
            f" (if it is still paused at {expires:%Y-%m-%d %H:%M:%S} UTC, the request expires and resume asks again)"
            if expires is not None
            else ""
        )
        return (
            f"{execution.ref} was paused by {who}{when}{why}. The request stays pending and can be decided "
            f"once an operator resumes it{lapse}"
        )
    if execution.status != Status.AWAITING_APPROVAL or execution.current_step != request.step:
        return f"{execution.ref} is {execution.get_status_display().lower()}, no longer waiting for this decision"
    return ""


def expires_soon(request: ApprovalRequest, *, now: dt.datetime | None = None) -> bool:
    if request.expires_at is None:
        return False
    return request.expires_at - (now or timezone.now()) <= EXPIRES_SOON


# --- The inbox --------------------------------------------------------------------


@dataclass(frozen=True)
class InboxItem:
    request: ApprovalRequest
    expires_soon: bool


def _with_relations(rows: QuerySet[ApprovalRequest]) -> QuerySet[ApprovalRequest]:
    return rows.select_related(
        "execution__parent", "artifact_version__artifact", "requested_by", "decision__decided_by"
    )


def _open_requests(now: dt.datetime) -> QuerySet[ApprovalRequest]:
    """``is_open`` as a filter: pending, unexpired, its execution awaiting it at its step."""
    return ApprovalRequest.objects.filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now),
        status=ApprovalRequest.State.PENDING,
        execution__status=Status.AWAITING_APPROVAL,
        execution__current_step=F("step"),
    )


def inbox_for(user: AbstractBaseUser) -> list[InboxItem]:
    """Open requests ``user`` may decide, oldest first.

    The database narrows to open requests (``is_open`` as a filter); ``can_decide`` alone says whose they are
    (pending requests are few: one per execution waiting at a gate).
    """
    now = timezone.now()
    candidates = _with_relations(_open_requests(now)).order_by("created_at", "id")
    return [
        InboxItem(request=r, expires_soon=expires_soon(r, now=now)) for r in candidates if policy.can_decide(user, r)
    ]


AUTHORITY_FIELDS = ("permission", "group", "separation_of_duties", "requested_by_id", "action")


def inbox_count(user: AbstractBaseUser) -> int:
    """How many items ``inbox_for(user)`` lists, without loading them: the open requests
    grouped by what ``can_decide`` reads, the rule asked once per group (the nav shows this
    on every page)."""
    grouped = (*AUTHORITY_FIELDS, "execution__workflow")  # the workflow: access by workflow's part of the rule
    groups = _open_requests(timezone.now()).values(*grouped).annotate(n=Count("id")).order_by()
    return sum(
        g["n"]
        for g in groups
        if policy.can_decide(
            user, ApprovalRequest(**{f: g[f] for f in AUTHORITY_FIELDS}), workflow=g["execution__workflow"]
        )
    )


def next_in_inbox(user: AbstractBaseUser, *, after: ApprovalRequest) -> ApprovalRequest | None:
    """Where a manager goes after deciding ``after``: the next item of their inbox in its
    order (oldest first), wrapping round to the first; None when nothing is left."""
    others = [item.request for item in inbox_for(user) if item.request.pk != after.pk]
    position = (after.created_at, after.pk)
    later = [r for r in others if (r.created_at, r.pk) > position]
    found = later or others
    return found[0] if found else None


# --- One request ------------------------------------------------------------------


def approval_for(pk: int) -> ApprovalRequest | None:
    return _with_relations(ApprovalRequest.objects.filter(pk=pk)).first()


def decision_of(request: ApprovalRequest) -> Decision | None:
    try:
        return request.decision
    except Decision.DoesNotExist:
        return None


# --- The audit history ------------------------------------------------------------


@dataclass
class HistoryFilters:
    approver: str = ""
    workflow: str = ""
    decision: str = ""
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    errors: list[str] = field(default_factory=list)

    def as_query(self) -> dict[str, str]:
        """The valid filters, as GET parameters (for the CSV link and the pager)."""
        out = {
            "approver": self.approver,
            "workflow": self.workflow,
            "decision": self.decision,
            "from": self.date_from.isoformat() if self.date_from else "",
            "to": self.date_to.isoformat() if self.date_to else "",
        }
        return {k: v for k, v in out.items() if v}


def _text_filter(raw: str, label: str, limit: int, errors: list[str]) -> str:
    raw = raw.strip()[:limit]
    if reason := text_refusal(raw):
        errors.append(f"Ignored the {label} filter: it {reason}.")
        return ""
    return raw


def _parse_date(raw: str, label: str, errors: list[str]) -> dt.date | None:
    raw = raw.strip()
    if not raw:
        return None
    try:
        return dt.datetime.strptime(raw, "%Y-%m-%d").date()
    except ValueError:
        errors.append(f"Ignored the {label} date {raw[:40]!r}: use YYYY-MM-DD.")
        return None


def history_filters(params: Any) -> HistoryFilters:
    """Read the filters from GET parameters; bad values are ignored and named in ``errors``."""
    errors: list[str] = []
    decision = (params.get("decision") or "").strip()
    if decision and decision not in DECISION_FILTERS:
        errors.append(f"Ignored the decision filter {decision!r}: use one of {', '.join(DECISION_FILTERS)}.")
        decision = ""
    filters = HistoryFilters(
        approver=_text_filter(params.get("approver") or "", "approver", 150, errors),
        workflow=_text_filter(params.get("workflow") or "", "workflow", 100, errors),
        decision=decision,
        date_from=_parse_date(params.get("from") or "", "from", errors),
        date_to=_parse_date(params.get("to") or "", "to", errors),
        errors=errors,
    )
    if filters.date_from and filters.date_to and filters.date_from > filters.date_to:
        errors.append(f"The from date {filters.date_from} is after the to date {filters.date_to}: nothing can match.")
    return filters


def approval_history(filters: HistoryFilters | None = None) -> QuerySet[ApprovalRequest]:
    """One row per request with its decision (if any) and counts of refusals and views; newest first."""
    rows = _with_relations(_history_matching(filters or HistoryFilters())).annotate(
        refused_count=Count("audit", filter=Q(audit__kind=AuditEntry.Kind.REFUSED)),
        viewed_count=Count("audit", filter=Q(audit__kind=AuditEntry.Kind.VIEWED)),
    )
    return rows.order_by("-created_at", "-id")


def _history_matching(filters: HistoryFilters) -> QuerySet[ApprovalRequest]:
    rows = ApprovalRequest.objects.all()
    if filters.approver:
        # By the name at decision time (rows older than that column: the name now, as shown).
        rows = rows.filter(
            Q(decision__decided_by_username__iexact=filters.approver)
            | Q(decision__decided_by_username="", decision__decided_by__username__iexact=filters.approver)
        )
    if filters.workflow:
        rows = rows.filter(execution__workflow=filters.workflow)
    if filters.decision == NO_DECISION:
        rows = rows.filter(decision__isnull=True)
    elif filters.decision:
        rows = rows.filter(decision__decision=filters.decision)
    if filters.date_from:
        rows = rows.filter(created_at__date__gte=filters.date_from)
    if filters.date_to:
        rows = rows.filter(created_at__date__lte=filters.date_to)
    return rows


def archived_history(filters: HistoryFilters | None = None) -> QuerySet[ApprovalTombstone]:
    """The requests of archived executions matching ``filters`` (their tombstones), newest first."""
    filters = filters or HistoryFilters()
    rows = ApprovalTombstone.objects.select_related("execution")
    if filters.approver:
        rows = rows.filter(decided_by__iexact=filters.approver)
    if filters.workflow:
        rows = rows.filter(execution__workflow=filters.workflow)
    if filters.decision == NO_DECISION:
        rows = rows.filter(decision="")
    elif filters.decision:
        rows = rows.filter(decision=filters.decision)
    if filters.date_from:
        rows = rows.filter(requested_at__date__gte=filters.date_from)
    if filters.date_to:
        rows = rows.filter(requested_at__date__lte=filters.date_to)
    return rows.order_by("-requested_at", "-id")


LIVE, ARCHIVED = "live", "archived"


def history_feed(filters: HistoryFilters | None = None) -> QuerySet:
    """The approval history as ``(kind, id, at)`` rows, newest first: the requests in the
    database (``approval_history``) and those of archived executions (``archived_history``,
    issue 39 item 10). Read a slice of it with ``history_rows``."""
    live = _history_matching(filters or HistoryFilters()).annotate(kind=Value(LIVE), at=F("created_at"))
    live = live.order_by().values_list("kind", "id", "at")
    gone = archived_history(filters).annotate(kind=Value(ARCHIVED), at=F("requested_at"))
    gone = gone.order_by().values_list("kind", "id", "at")
    return live.union(gone, all=True).order_by("-at", "-id")


def history_rows(rows) -> list[ApprovalRequest | ApprovalTombstone]:
    """The ``(kind, id, at)`` rows of ``history_feed`` as requests (annotated as
    ``approval_history`` makes them) and tombstones, in their order (a query per kind)."""
    rows = list(rows)
    live = [pk for kind, pk, _at in rows if kind == LIVE]
    gone = [pk for kind, pk, _at in rows if kind == ARCHIVED]
    found = {(LIVE, r.pk): r for r in approval_history().filter(pk__in=live)} if live else {}
    if gone:
        found |= {
            (ARCHIVED, t.pk): t for t in ApprovalTombstone.objects.filter(pk__in=gone).select_related("execution")
        }
    return [found[(kind, pk)] for kind, pk, _at in rows if (kind, pk) in found]


def archived_approval(pk: int) -> ApprovalTombstone | None:
    """What stays of request ``pk`` if its execution was archived and purged."""
    return ApprovalTombstone.objects.filter(pk=pk).select_related("execution").first()


def history_workflows() -> list[str]:
    """Workflow names that have approval requests, archived ones' included (the filter's choices)."""
    live = ApprovalRequest.objects.order_by().values_list("execution__workflow", flat=True).distinct()
    gone = ApprovalTombstone.objects.order_by().values_list("execution__workflow", flat=True).distinct()
    return sorted(set(live) | set(gone))


# --- One request's story ----------------------------------------------------------


@dataclass(frozen=True)
class StoryItem:
    at: dt.datetime
    source: str  # "audit" or "event"
    kind: str  # the audit kind, or the execution event's type
    actor: str
    version: int | None = None
    sha256: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    from_status: str = ""
    to_status: str = ""
    synthesized: bool = False  # rebuilt from the request or decision row, no audit entry found
    order: int = 0

    @property
    def reason(self) -> str:
        for key in ("reason", "message", "error"):
            if self.detail.get(key):
                return str(self.detail[key])
        return ""

    @property
    def receipt(self) -> list[tuple[str, str]]:
        """The identifiers in an ``action.succeeded`` event's receipt."""
        return receipt_fields(self.detail.get("receipt"))

    @property
    def evidence(self) -> str:
        """An operator's evidence, or what a lookup found (or failed to find)."""
        evidence = self.detail.get("evidence")
        if isinstance(evidence, dict):
            return "; ".join(f"{k}: {v}" for k, v in evidence.items() if k != "found" and v not in (None, ""))
        return str(evidence) if evidence else ""

    @property
    def extra(self) -> list[tuple[str, str]]:
        """The audit entry's other details, as (name, value) pairs (never looked up by name in a template)."""
        shown = {"reason", "decision", "comment", "evidence", "receipt"}
        return [(str(k), str(v)) for k, v in self.detail.items() if k not in shown]


def event_window(request: ApprovalRequest) -> QuerySet[ExecutionEvent]:
    """The execution's events from this request being made until the next request is made."""
    events = ExecutionEvent.objects.filter(execution_id=request.execution_id)
    asked = events.filter(type="approval.requested", payload__approval_id=request.pk).order_by("id").first()
    window = events.filter(id__gte=asked.pk) if asked else events.filter(created_at__gte=request.created_at)
    following = window.filter(type="approval.requested").exclude(payload__approval_id=request.pk).order_by("id").first()
    if following is not None:
        window = window.filter(id__lt=following.pk)
    return window.select_related("actor").order_by("id")


def _actor(label: str, user) -> str:
    if label:
        return label
    return f"user:{user.get_username()}" if user is not None else "system"


def approval_story(request: ApprovalRequest) -> list[StoryItem]:
    """Everything that happened to one request, in time order.

    Its audit entries (requested, viewed, refused, decided, superseded, expired,
    withdrawn) merged with the execution's events from the request until the next
    request on the same execution: what the runtime did after the decision. Audit
    entries already tell who requested and who decided, so the matching
    ``approval.requested`` / ``approval.decided`` events are left out; when the audit
    trail lacks them (older rows), they are rebuilt from the request and decision.
    """
    entries = list(request.audit.select_related("actor").order_by("id"))
    kinds = {e.kind for e in entries}
    items: list[StoryItem] = [
        StoryItem(
            at=e.created_at,
            source="audit",
            kind=e.kind,
            actor=_actor(e.actor_label, e.actor),
            version=e.artifact_version,
            sha256=e.content_sha256,
            detail=e.detail or {},
            order=e.pk,
        )
        for e in entries
    ]
    if AuditEntry.Kind.REQUESTED not in kinds:
        items.append(
            StoryItem(
                at=request.created_at,
                source="audit",
                kind=AuditEntry.Kind.REQUESTED,
                actor=f"user:{request.requested_by.get_username()}",
                version=request.version,
                sha256=request.content_sha256,
                detail={"action": request.action, "step": request.step},
                synthesized=True,
                order=-1,
            )
        )
    decision = decision_of(request)
    if decision is not None and AuditEntry.Kind.DECIDED not in kinds:
        items.append(
            StoryItem(
                at=decision.created_at,
                source="audit",
                kind=AuditEntry.Kind.DECIDED,
                actor=f"user:{decision.approver}",
                version=decision.artifact_version,
                sha256=decision.content_sha256,
                detail={"decision": decision.decision, "comment": decision.comment, "event_id": decision.event_id},
                synthesized=True,
            )
        )
    skip = {"approval.requested", "approval.decided"}
    for ev in event_window(request):
        if ev.type in skip and ev.payload.get("approval_id") == request.pk:
            continue
        items.append(
            StoryItem(
                at=ev.created_at,
                source="event",
                kind=ev.type,
                actor=_actor(ev.actor_label, ev.actor),
                version=ev.payload.get("artifact_version"),
                sha256=ev.payload.get("content_sha256", ""),
                detail=ev.payload or {},
                from_status=ev.from_status,
                to_status=ev.to_status,
                order=ev.pk,
            )
        )
    return sorted(items, key=lambda i: (i.at, i.source != "audit", i.order))


def third_party_messages(approval: ApprovalRequest) -> list[tuple[str, Template]]:
    """What the approved execution may then send to a third party without asking again:
    (where, template) of its workflow's templated effects (executions.authoring.outbound)."""
    execution = approval.execution
    try:
        workflow = registry.get(execution.workflow, execution.workflow_version)
    except registry.UnknownWorkflow:
        return []
    return workflow.third_party_messages()


# --- What a manager reads beside a tool call they approve


@dataclass(frozen=True)
class AgentRead:
    """One result an agent's tool returned before it proposed the call awaiting approval."""

    tool: str
    args: str  # compact JSON
    result: str  # indented JSON, clipped
    is_error: bool


def agent_reads(request: ApprovalRequest) -> list[AgentRead]:
    """For the approval of an agent's tool call: what its tools read first (the ticket,
    the order, the stock…), so a manager judges the arguments against the facts."""
    if request.artifact_version.artifact.kind != TOOL_CALL_ARTIFACT_KIND:
        return []
    out = []
    for result in recorded_results(request.execution, request.step, request.round):
        shown = json.dumps(result.get("content"), indent=2, sort_keys=True, ensure_ascii=False, default=str)
        out.append(
            AgentRead(
                tool=str(result.get("tool", "")),
                args=json.dumps(result.get("args"), sort_keys=True, ensure_ascii=False, default=str)
                if result.get("args") is not None
                else "",
                result=shown if len(shown) <= 4000 else shown[:3999] + "…",
                is_error=bool(result.get("is_error")),
            )
        )
    return out
