"""HTTP middleware of the project, each with one job.

``NoStoreMiddleware`` — site-wide ``Cache-Control: no-store``: a policy, not a
feature of one view.

``EdgeMiddleware`` — the HTTP edge, before any view: body size, content type, and JSON
errors under /api/.

* A body over ``MAX_BODY_BYTES`` (by its Content-Length) is refused before it is
  read: 413 JSON on the API, 413 with a sentence on the screens.
* A body-carrying request (POST, PUT, PATCH) in the wrong content type is a 415: on
  the API anything but JSON, on the screens anything but a form encoding (a declared
  other type, or a body with no type at all).
* Every error the API answers is JSON: Django's own 404 (no such endpoint), 405, 400
  and the 500 of an unhandled exception are rewritten as ``{"detail": "…"}`` with the
  same status (the exception itself is still logged by Django).

``UnavailableMiddleware`` — while PostgreSQL or the broker is out of reach (a restart,
a failover), a request answers 503 with ``Retry-After``: JSON under /api/, a page that
retries by itself on the screens; never a traceback page. A view's exception is
caught here; one raised by another middleware reaches ``handler500``, which asks the
same question (config.error_views).

``HtmxLoginRedirectMiddleware`` — an htmx request from an ended session goes to the
login page, whole. ``login_required`` answers 302 to the login page; an XHR follows it
silently and htmx would swap the login page into the panel it was refreshing. This
turns that redirect into ``HX-Redirect``, so the browser itself navigates to the login
page, with ``next`` pointing back at the page the person was on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import resolve_url
from django.template import loader
from django.utils.cache import add_never_cache_headers

from executions import runtime

log = logging.getLogger(__name__)


class NoStoreMiddleware:
    """Every response the application renders (pages of signed-in users, every API answer,
    the login page) carries ``Cache-Control: no-store``: nothing private is kept by a browser
    or a proxy. Static files are served by WhiteNoise before this runs, with long caching."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.static_prefix = "/" + settings.STATIC_URL.lstrip("/")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith(self.static_prefix):
            add_never_cache_headers(response)
        return response


MAX_BODY_BYTES = 1_000_000
API_PREFIX = "/api/"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})

_GENERIC = {
    400: "bad request",
    403: "forbidden",
    404: "no such API endpoint",
    405: "method not allowed",
    413: f"the request body is over {MAX_BODY_BYTES:,} bytes",
    500: "internal error: it was logged; the request may not have been applied",
    503: "unavailable for a moment: retry after the seconds in Retry-After",
}


def _content_length(request: HttpRequest) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


def _is_json(content_type: str) -> bool:
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


class EdgeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        api = request.path_info.startswith(API_PREFIX)
        refused = self._refusal(request, api=api)
        if refused is not None:
            return refused
        response = self.get_response(request)
        return _as_json_error(response) if api else response

    def _refusal(self, request: HttpRequest, *, api: bool) -> HttpResponse | None:
        length = _content_length(request)
        if length > MAX_BODY_BYTES:
            message = f"the request body is {length:,} bytes; at most {MAX_BODY_BYTES:,} are accepted"
            if api:
                return JsonResponse({"detail": message}, status=413)
            return HttpResponse(
                f"This form sent too much data: {message}. Go back and shorten what you entered.",
                status=413,
                content_type="text/plain; charset=utf-8",
            )
        if request.method not in BODY_METHODS:
            return None
        declared = request.content_type or ""  # without its parameters
        accepted = _is_json(declared) if api else declared in FORM_TYPES
        if (declared and not accepted) or (length and not declared):
            if api:
                return JsonResponse(
                    {"detail": f"send the body as application/json, not {declared or 'an undeclared type'}"},
                    status=415,
                )
            return HttpResponse(
                f"This form was sent as {declared or 'an undeclared type'}; send it from the page "
                "(application/x-www-form-urlencoded or multipart/form-data).",
                status=415,
                content_type="text/plain; charset=utf-8",
            )
        return None


def _as_json_error(response: HttpResponse) -> HttpResponse:
    """An API answer of 400 or more that isn't JSON becomes JSON, keeping status and Allow."""
    if response.status_code < 400 or response.get("Content-Type", "").startswith("application/json"):
        return response
    message = _GENERIC.get(response.status_code) or response.reason_phrase.lower()
    answer = JsonResponse({"detail": message}, status=response.status_code)
    for header in ("Allow", "Retry-After", "WWW-Authenticate"):
        if header in response:
            answer[header] = response[header]
    return answer


# How long a client should wait before trying again while the database or broker is away:
# a PostgreSQL restart or a Redis failover takes seconds.
RETRY_AFTER_SECONDS = 5


def unavailable(request: HttpRequest, what: str) -> HttpResponse:
    """503 with ``Retry-After`` because the ``what`` ("database", "broker") is out of
    reach: JSON under /api/, else the page (rendered without the request's context
    processors: they read the database)."""
    if request.path_info.startswith(API_PREFIX):
        response: HttpResponse = JsonResponse(
            {
                "detail": f"the {what} is out of reach for a moment; nothing was done: retry after {RETRY_AFTER_SECONDS} s",
                "retry_after": RETRY_AFTER_SECONDS,
            },
            status=503,
        )
    else:
        page = loader.get_template("503.html").render({"what": what, "retry_after": RETRY_AFTER_SECONDS})
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class UnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        what = runtime.unavailable(exception)
        if not what:
            return None
        log.warning("%s %s: the %s is out of reach, answered 503: %s", request.method, request.path, what, exception)
        return unavailable(request, what)


class HtmxLoginRedirectMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not getattr(request, "htmx", False) or response.status_code not in (301, 302, 303, 307, 308):
            return response
        login = resolve_url(settings.LOGIN_URL)
        if urlsplit(response.get("Location", "")).path != login:
            return response
        current = request.htmx.current_url_abs_path or "/"
        answer = HttpResponse(status=204)
        answer["HX-Redirect"] = f"{login}?{urlencode({'next': current})}"
        return answer
