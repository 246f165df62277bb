"""Logging in: the forms of the dashboard and the admin, and the client address lockouts use.

A username no account can have is an "invalid login" like any other, refused before it
reaches authentication.

Django's ``AuthenticationForm`` tells the browser the username's maximum length but does
not enforce it, so a 256-character username went on to django-axes, whose failure
record can't hold it (a 500). Here a username longer than the user model's (150) is
refused with the form's ordinary "invalid login" message, and nothing is written.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm


def _username_max_length() -> int:
    model = get_user_model()
    return model._meta.get_field(model.USERNAME_FIELD).max_length or 150


class _Bounded:
    def clean(self):
        username = self.data.get("username", "")
        if isinstance(username, str) and len(username) > _username_max_length():
            raise self.get_invalid_login_error()
        return super().clean()


class LoginForm(_Bounded, AuthenticationForm):
    """The dashboard's login (``/login/``)."""


class AdminLoginForm(_Bounded, AdminAuthenticationForm):
    """The admin's login (``/admin/login/``)."""


def client_address(request) -> str | None:
    """The client's address for django-axes (``AXES_CLIENT_IP_CALLABLE``): with
    ``KEEL_TRUSTED_PROXY_COUNT`` = n proxies in front, the n-th address from the right of
    ``X-Forwarded-For`` (the one the outermost trusted proxy saw); without a proxy, or a
    header that didn't pass through them all, the connection's address."""
    remote = request.META.get("REMOTE_ADDR")
    count = settings.KEEL_TRUSTED_PROXY_COUNT
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    if count <= 0 or len(forwarded) < count:
        return remote
    candidate = forwarded[-count]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote
