"""The Content-Security-Policy of every HTML page.

Scripts, styles, images and requests from our own origin only (htmx and the pages'
scripts are static files), no inline script or style, no plugins, no ``<base>``, no
framing, forms post only to us. ``img-src`` also allows ``data:`` (small inline
icons, e.g. Swagger UI's). A response that already carries a policy keeps it (the
raw artifact view sends ``sandbox``, stricter for model-produced bytes).

``settings.CONTENT_SECURITY_POLICY`` holds the directives; the middleware adds the
header to every ``text/html`` response, error pages and the admin included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"

DEFAULT_POLICY: Mapping[str, str] = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "frame-ancestors": "'none'",
    "form-action": "'self'",
}


def header_value(policy: Mapping[str, str]) -> str:
    return "; ".join(f"{directive} {sources}" for directive, sources in policy.items())


class ContentSecurityPolicyMiddleware:
    """Adds the policy to HTML responses that don't set their own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.value = header_value(getattr(settings, "CONTENT_SECURITY_POLICY", DEFAULT_POLICY))

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        content_type = response.get("Content-Type", "")
        if content_type.split(";", 1)[0].strip().lower() == "text/html" and HEADER not in response:
            response[HEADER] = self.value
        return response
