"""What an audit screen is made of, for both of them — the approval history
(``approvals.audit_views``) and the operator audit (``console.operator_audit_views``):
the filters read from the query string, with what was ignored said as messages; a
page of the rows; and the CSV export, with cells a spreadsheet won't run.

``filters`` is any object with ``errors`` (sentences) and ``as_query()`` (the valid
filters as GET parameters, for the pager and the CSV link). Rows are read as the
caller's query gives them; nothing here knows what they are.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.http import urlencode

from .spreadsheet import safe_cell


class Filters(Protocol):
    errors: list[str]

    def as_query(self) -> dict[str, str]: ...


def page_of(request: HttpRequest, rows: QuerySet, filters: Filters, *, size: int) -> tuple[Page, str]:
    """The requested page of ``rows`` and the filters as a query string; each filter that
    was ignored is said as a message on the page."""
    for error in filters.errors:
        messages.error(request, error)
    return Paginator(rows, size).get_page(request.GET.get("page")), urlencode(filters.as_query())


def csv_export(filename: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> HttpResponse:
    """``rows`` as a CSV download named ``filename``, under ``header``."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow(header)
    for row in rows:
        writer.writerow([cell(value) for value in row])
    return response


def cell(value: Any) -> str:
    """A CSV cell a spreadsheet won't run as a formula (comments, reasons and names are user input)."""
    return safe_cell(value)
