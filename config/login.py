"""Logging in: the login page of the dashboard, the forms of the dashboard and the admin,
and the client address lockouts use.

The login page offers the single sign-on provider when ``OIDC_ISSUER`` is set (a link to
keel's own ``/oidc/authenticate/``, which redirects: the CSP's ``form-action 'self'`` holds)
and the password form unless ``KEEL_PASSWORD_LOGIN=off``. Then a password posted to
``/login/`` or ``/admin/login/`` is refused with a sentence before it reaches
authentication (nothing is checked, nothing counted against a lockout), and the admin's
login page sends people to the dashboard's. API bearer tokens are not logins: unaffected.

A username no account can have is an "invalid login" like any other, refused before it
reaches authentication.

Django's ``AuthenticationForm`` tells the browser the username's maximum length but does
not enforce it, so a 256-character username went on to django-axes, whose failure
record can't hold it (a 500). Here a username longer than the user model's (150) is
refused with the form's ordinary "invalid login" message, and nothing is written.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.urls import reverse

PASSWORD_LOGIN_OFF = "Signing in with a password is turned off here: sign in through single sign-on, on /login/."


def _username_max_length() -> int:
    model = get_user_model()
    return model._meta.get_field(model.USERNAME_FIELD).max_length or 150


class _Bounded:
    def clean(self):
        if not settings.KEEL_PASSWORD_LOGIN:
            raise ValidationError(PASSWORD_LOGIN_OFF, code="password_login_off")
        username = self.data.get("username", "")
        if isinstance(username, str) and len(username) > _username_max_length():
            raise self.get_invalid_login_error()
        return super().clean()


class LoginForm(_Bounded, AuthenticationForm):
    """The dashboard's login (``/login/``)."""


class AdminLoginForm(_Bounded, AdminAuthenticationForm):
    """The admin's login (``/admin/login/``)."""


class LoginView(auth_views.LoginView):
    """``/login/``: the provider's link, the password form, or both."""

    authentication_form = LoginForm

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["password_login"] = settings.KEEL_PASSWORD_LOGIN
        context["sso_host"] = urlsplit(settings.OIDC_ISSUER).netloc if settings.OIDC_ISSUER else ""
        return context

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.has_error(NON_FIELD_ERRORS, "password_login_off"):
            response.status_code = 403
        return response


def admin_login(request, extra_context=None):
    """``/admin/login/``: with password sign-in off, a visitor is sent to the dashboard's login
    (single sign-on) and back; a password posted here is still refused by the form."""
    if not settings.KEEL_PASSWORD_LOGIN and request.method == "GET" and not request.user.is_authenticated:
        return redirect_to_login(request.GET.get("next") or reverse("admin:index"))
    return admin.site.login(request, extra_context)


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
