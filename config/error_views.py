"""Error pages: styled, with a way back. Under ``/api/`` the edge middleware answers
JSON instead (config.middleware), so these render HTML only.

``server_error`` renders without the request's context processors: whatever broke
(the database, a template) must not break the error page too.
"""

from __future__ import annotations

import sys

from django.http import HttpRequest, HttpResponse
from django.template import loader

from config.middleware import unavailable
from executions import runtime
from executions.errors import Gone


def _page(request: HttpRequest, status: int, title: str, message: str) -> HttpResponse:
    template = loader.get_template("error.html")
    context = {"status": status, "title": title, "message": message, "path": request.path[:200]}
    return HttpResponse(template.render(context, request), status=status)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _page(request, 400, "Bad request", "The request could not be understood.")


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _page(
        request,
        403,
        "Not allowed",
        "Your account doesn't have the permission this page needs. Ask an administrator to add you to the right group.",
    )


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    gone = exception.args[0] if exception is not None and exception.args else None
    if isinstance(gone, Gone):  # an archived execution (retention): where its record is now
        return _page(request, 410, "Archived", f"{gone.message}. `keel archive --show` prints it from the archive.")
    return _page(request, 404, "Not found", "There is nothing at this address. It may have been mistyped.")


def server_error(request: HttpRequest) -> HttpResponse:
    """500 — or 503 with ``Retry-After`` when what failed is the database or the broker
    going away outside a view (a middleware reading the session, saving it)."""
    what = runtime.unavailable(sys.exc_info()[1]) if sys.exc_info()[1] is not None else ""
    if what:
        return unavailable(request, what)
    template = loader.get_template("500.html")
    return HttpResponse(template.render({}), status=500)  # no request: no context processors
