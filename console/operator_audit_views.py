"""The operator audit (operators and auditors): every act a person took on executions,
filtered by actor, action, execution and dates, paged, and as CSV. The query is
``triage.operator_audit``; these views only parse, read and render."""

from __future__ import annotations

import csv

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from accounts.roles import reads_operator_audit
from triage import operator_audit

CSV_HEADER = ["at", "execution", "actor", "action", "reason", "before", "after", "subject", "batch"]


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
    for error in filters.errors:
        messages.error(request, error)
    page = Paginator(operator_audit.acts(filters), operator_audit.PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "executions/operator_audit.html",
        {
            "page": page,
            "acts": [operator_audit.act_of(event) for event in page.object_list],
            "filters": filters,
            "query": urlencode(filters.as_query()),
            "actions": operator_audit.ACTIONS,
        },
    )


def _cell(value) -> str:
    """A CSV cell a spreadsheet won't run as a formula (reasons and names are user input)."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


@readers_only
@require_GET
def operator_audit_export(request: HttpRequest) -> HttpResponse:
    filters = operator_audit.filters_from(request.GET)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="operator-audit.csv"'
    writer = csv.writer(response)
    writer.writerow(CSV_HEADER)
    for event in operator_audit.acts(filters).iterator(chunk_size=500):
        act = operator_audit.act_of(event)
        writer.writerow(
            [
                _cell(v)
                for v in (
                    act.at.isoformat(),
                    act.execution,
                    act.actor,
                    act.action,
                    act.reason,
                    act.before,
                    act.after,
                    act.subject,
                    act.batch,
                )
            ]
        )
    return response
