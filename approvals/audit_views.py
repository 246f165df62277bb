"""Audit screens for people with ``approvals.view_audit``: history, one request's story, CSV."""

from __future__ import annotations

from datetime import timedelta
from itertools import islice

from django.conf import settings
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from accounts.identities import described_actors
from executions.models import ExecutionTombstone

from . import outcomes, selectors
from .listing import csv_export, page_of
from .models import ApprovalTombstone

VIEW_AUDIT = "approvals.view_audit"

CSV_HEADER = [
    "request_id",
    "execution",
    "workflow",
    "artifact",
    "version",
    "content_sha256",
    "action",
    "step",
    "requested_by",
    "requested_at",
    "status",
    "decided_by",
    "decision",
    "decided_at",
    "comment",
    "refused_attempts",
    "views",
    "outcome",  # what the decision unlocked and how each ended, as the page words it (issue 39 item 15)
]


def auditors_only(view):
    """Anonymous: to the login page; signed in without the permission: 403."""
    return login_required(permission_required(VIEW_AUDIT, raise_exception=True)(view))


@auditors_only
@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    filters = selectors.history_filters(request.GET)
    page, query = page_of(request, selectors.history_feed(filters), filters, size=selectors.HISTORY_PAGE_SIZE)
    rows = selectors.history_rows(page.object_list)
    effects = outcomes.authorised_effects(r for r in rows if not isinstance(r, ApprovalTombstone))
    return render(
        request,
        "approvals/audit_list.html",
        {
            "page": page,
            "rows": [(r, effects.get(r.pk, [])) for r in rows],
            "filters": filters,
            "query": query,
            "workflows": selectors.history_workflows(),
            "decisions": selectors.DECISION_FILTERS,
            "retention": _retention_note(filters),
        },
    )


def _retention_note(filters) -> dict:
    """What the history can't show any more (issue 23): executions that ended more than
    RUNTIME_RETENTION_DAYS ago are archived and purged; their approvals are in the archive."""
    days = settings.RUNTIME_RETENTION_DAYS
    cutoff = timezone.now() - timedelta(days=days)
    date_from = getattr(filters, "date_from", None)
    bucket = settings.STORAGES["artifacts"].get("OPTIONS", {}).get("bucket_name")
    where = f"s3://{bucket}/archive/" if bucket else f"{settings.ARTIFACTS_ROOT}/archive/"
    return {
        "days": days,
        "cutoff": cutoff,
        "reaches_past": date_from is None or date_from < cutoff.date(),
        "archived": ExecutionTombstone.objects.count(),
        "where": where,
    }


@auditors_only
@require_GET
def audit_story(request: HttpRequest, pk: int) -> HttpResponse:
    approval = selectors.approval_for(pk)
    if approval is None:
        archived = selectors.archived_approval(pk)
        if archived is None:
            raise Http404(f"no approval request {pk}")
        return render(request, "approvals/audit_archived.html", {"approval": archived})
    story = selectors.approval_story(approval)
    after = outcomes.after_request(approval, window=selectors.event_window(approval))
    return render(
        request,
        "approvals/audit_story.html",
        {
            "approval": approval,
            "decision": selectors.decision_of(approval),
            "story": story,
            "signed_in": described_actors(item.actor for item in story),  # single sign-on's subjects, one query
            "effects": after.effects,
            "told": after.told,
        },
    )


@auditors_only
@require_GET
def audit_export(request: HttpRequest) -> HttpResponse:
    filters = selectors.history_filters(request.GET)
    return csv_export(
        "approval-history.csv", CSV_HEADER, _rows(selectors.history_feed(filters).iterator(chunk_size=500))
    )


def _rows(feed):
    """The CSV rows, 500 at a time: the requests with their outcome (``outcomes.authorised_effects``),
    an archived one from its tombstone."""
    while chunk := selectors.history_rows(islice(feed, 500)):
        effects = outcomes.authorised_effects(r for r in chunk if not isinstance(r, ApprovalTombstone))
        for r in chunk:
            yield _archived_row(r) if isinstance(r, ApprovalTombstone) else _row(r, effects.get(r.pk, []))


def _archived_row(t: ApprovalTombstone) -> tuple:
    """An archived request's row: what its tombstone keeps; the rest is in the archive."""
    return (
        t.pk,
        str(t.execution),
        t.execution.workflow,
        "",
        t.version,
        t.content_sha256,
        t.action,
        t.step,
        t.requested_by,
        t.requested_at.isoformat(),
        f"archived ({t.status})",
        t.decided_by,
        t.decision,
        t.decided_at.isoformat() if t.decided_at else "",
        "",
        "",
        "",
        f"archived {t.execution.archived_at:%Y-%m-%d %H:%M:%S} UTC in {t.execution.manifest}: "
        f"keel archive --show {t.execution}",
    )


def _outcome(effects) -> str:
    """The page's Outcome cell as text: each effect's wording and receipt, ``; `` between them."""
    return "; ".join(" ".join([e.wording, *(f"{name}={value}" for name, value in e.receipt)]) for e in effects)


def _row(r, effects) -> tuple:
    d = selectors.decision_of(r)
    return (
        r.pk,
        r.execution.ref,
        r.execution.workflow,
        r.artifact_version.artifact.ref,
        r.version,
        r.content_sha256,
        r.action,
        r.step,
        r.requested_by.get_username(),
        r.created_at.isoformat(),
        r.status,
        d.approver if d else "",
        d.decision if d else "",
        d.created_at.isoformat() if d else "",
        d.comment if d else "",
        r.refused_count,
        r.viewed_count,
        _outcome(effects),
    )
