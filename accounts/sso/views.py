"""The two addresses of single sign-on: ``/oidc/authenticate/`` sends the browser to the
provider, ``/oidc/callback/`` (the redirect URI registered there) signs in whom it sends back.

Neither ever answers with an error page. Whatever goes wrong — the provider down or
misnamed, a stale or replayed link, a token that fails a check, a deactivated user — ends
on the login page with one sentence, and one warning line in the log (logger
``accounts.sso``) naming the reason; nothing is written. Both are 404 while
``OIDC_ISSUER`` is unset.
"""

from __future__ import annotations

import logging
import re

from django.conf import settings
from django.contrib import auth, messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.generic import View
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from accounts.identities import SignInRefused, identity_described
from accounts.sso import configured, discovery

logger = logging.getLogger("accounts.sso")
STALE = "That sign-in did not start in this browser, or was already used: sign in again."


def _refused(request: HttpRequest, refusal: SignInRefused) -> HttpResponse:
    logger.warning("single sign-on refused: %s", refusal.reason)
    messages.error(request, refusal.sentence)
    return redirect("login")


class SignInView(OIDCAuthenticationRequestView):
    """To the provider's authorization endpoint, with a new state, nonce and PKCE challenge
    kept in the session (mozilla-django-oidc's), the endpoint read from discovery."""

    def __init__(self, **kwargs) -> None:
        View.__init__(self, **kwargs)  # not mozilla-django-oidc's: its endpoint is a setting

    def get(self, request: HttpRequest) -> HttpResponse:
        if not configured():
            raise Http404
        try:
            provider = discovery.provider()
        except SignInRefused as refusal:
            return _refused(request, refusal)
        self.OIDC_OP_AUTH_ENDPOINT = provider.authorization_endpoint
        self.OIDC_RP_CLIENT_ID = settings.OIDC_CLIENT_ID
        return super().get(request)


class CallbackView(OIDCAuthenticationCallbackView):
    """Where the provider sends the browser back: the state must be one this session
    started (used once), then ``ProviderBackend`` exchanges the code and checks the token."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not configured():
            raise Http404
        try:
            self.user = self._signed_in(request)
        except SignInRefused as refusal:
            return _refused(request, refusal)
        logger.info(
            "%s %s; groups %s",
            self.user.get_username(),
            identity_described(self.user),
            ", ".join(sorted(self.user.groups.values_list("name", flat=True))) or "none",
        )
        return self.login_success()

    def _signed_in(self, request: HttpRequest):
        error = request.GET.get("error")
        if error:
            code = re.sub(r"[^a-z_]", "", error.lower())[:40] or "error"
            raise SignInRefused(
                f"the provider answered {error!r}: {request.GET.get('error_description', '')!r}",
                f"The provider did not sign you in ({code}).",
            )
        code, state = request.GET.get("code"), request.GET.get("state")
        states = request.session.get("oidc_states")
        if not code or not state:
            raise SignInRefused("the callback came without a code and a state", STALE)
        if not isinstance(states, dict) or state not in states:
            raise SignInRefused("the callback's state is not one this browser's session started, or was used", STALE)
        started = states.pop(state)  # used once, whatever follows
        request.session.modified = True
        request.session.save()
        iss = request.GET.get("iss")  # RFC 9207: a provider that names itself must be ours (a mix-up)
        if iss is not None and iss != settings.OIDC_ISSUER:
            raise SignInRefused(f"the callback comes from the issuer {iss!r}, not {settings.OIDC_ISSUER!r}")
        user = auth.authenticate(
            request=request, oidc_nonce=started.get("nonce"), oidc_code_verifier=started.get("code_verifier")
        )
        if user is None:
            raise SignInRefused("no authentication backend takes a provider's sign-in (AUTHENTICATION_BACKENDS)")
        return user
