"""How a Task API request is signed in: a bearer token, or the browser's session."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer, SessionAuth

from accounts.tokens import user_for_token


class BearerToken(HttpBearer):
    """``Authorization: Bearer <token>``: the user the token was made for (accounts.tokens)."""

    def authenticate(self, request: HttpRequest, token: str):
        user = user_for_token(token)
        if user is not None:
            request.user = user
        return user


class BrowserSession(SessionAuth):
    """Django's session, CSRF-checked on writes — but only for a logged-in session, so
    a request with no credentials at all is a 401, not a CSRF 403."""

    def _get_key(self, request: HttpRequest):
        if not request.user.is_authenticated:
            return None
        return super()._get_key(request)
