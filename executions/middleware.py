"""An htmx request from an ended session goes to the login page, whole.

``login_required`` answers 302 to the login page; an XHR follows it silently and
htmx would swap the login page into the panel it was refreshing. This turns that
redirect into ``HX-Redirect``, so the browser itself navigates to the login page,
with ``next`` pointing back at the page the person was on.
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url


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
