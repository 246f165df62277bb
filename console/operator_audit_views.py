"""The operator audit (operators and auditors): every act a person took on executions,
and on workflows' kill switches and schedules, filtered by actor, action, execution
and dates, paged, and as CSV. The query is ``console.audit_feed.feed``; these views
only parse, read and render."""

from __future__ import annotations

from itertools import islice

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.roles import reads_operator_audit
from approvals.listing import csv_export, page_of
from triage import operator_audit

from . import audit_feed

CSV_HEADER = ["at", "execution", "actor", "action", "reason", "before", "after", "subject", "batch", "via"]


def readers_only(view):
    """Anonymous: to the login page; signed in, neither operator nor auditor: 403."""

    def checked(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not reads_operator_audit(request.user):
            raise PermissionDenied("operators and auditors read the operator audit")
        return view(request, *args, **kwargs)

    return login_required(checked)


@readers_only
@require_GET
def operator_audit_list(request: HttpRequest) -> HttpResponse:
    filters = operator_audit.filters_from(request.GET)
    page, query = page_of(request, audit_feed.feed(filters), filters, size=operator_audit.PAGE_SIZE)
    return render(
        request,
        "executions/operator_audit.html",
        {
            "page": page,
            "acts": audit_feed.acts_in(page.object_list),
            "filters": filters,
            "query": query,
            "actions": operator_audit.ACTIONS + operator_audit.OTHER_ACTIONS,
        },
    )


@readers_only
@require_GET
def operator_audit_export(request: HttpRequest) -> HttpResponse:
    filters = operator_audit.filters_from(request.GET)
    acts = _chunked(audit_feed.feed(filters).iterator(chunk_size=500))
    return csv_export(
        "operator-audit.csv",
        CSV_HEADER,
        (
            (a.at.isoformat(), a.execution, a.actor, a.action, a.reason, a.before, a.after, a.subject, a.batch, a.via)
            for a in acts
        ),
    )


def _chunked(rows, size: int = 500):
    """The feed's rows as Acts, ``size`` at a time."""
    while chunk := list(islice(rows, size)):
        yield from audit_feed.acts_in(chunk)
