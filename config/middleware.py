"""Site-wide response headers that are policy, not features of one view."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers


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
