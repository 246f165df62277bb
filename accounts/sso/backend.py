"""The authentication backend of single sign-on: mozilla-django-oidc's, checking what it leaves out.

mozilla-django-oidc (5.0.2) exchanges the code, fetches the provider's JWKS, checks the
ID token's signature and algorithm against it and compares the nonce. It does not check
``iss`` nor ``aud`` (it decodes with ``verify_aud`` off and no issuer), lets PyJWT refuse an
expired token with an error it does not catch (a 500), and matches users by e-mail. Here,
in one call to PyJWT: RS256 only, ``iss`` equal to ``OIDC_ISSUER``, ``aud`` holding the
client id, ``exp`` in the future and ``iat`` not (``LEEWAY_SECONDS`` either way), ``sub``
present; then ``azp`` equal to the client id when there are several audiences (or any
``azp``), the userinfo's ``sub`` equal to the token's, and the user found by (issuer,
subject) through ``accounts.identities``.

Every refusal is a ``SignInRefused`` naming its reason (``accounts.sso.views`` logs it and
draws the login page); nothing is written before all checks passed.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.urls import reverse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import absolutify, import_from_settings

from accounts.identities import SignInRefused, identity_sign_in
from accounts.sso import discovery

ALGORITHM = "RS256"
LEEWAY_SECONDS = 30
REQUIRED_CLAIMS = ["iss", "aud", "exp", "iat", "sub"]
# What mozilla-django-oidc's own refusals (SuspiciousOperation) mean.
ITS_REFUSALS = {
    "JWT Nonce verification failed.": "the ID token's nonce is not the one this sign-in sent",
    "Could not find a valid JWKS.": "no key of the provider's JWKS matches the ID token's kid and alg",
}


class ProviderBackend(OIDCAuthenticationBackend):
    """Signs in the user the configured provider vouches for, from the callback only."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django builds a backend for every authenticate() and every session's user: nothing
        # is fetched here (the endpoints come from discovery at the sign-in, ``authenticate``).
        self.UserModel = get_user_model()
        self.OIDC_RP_CLIENT_ID = settings.OIDC_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = ALGORITHM
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.OIDC_OP_TOKEN_ENDPOINT = self.OIDC_OP_JWKS_ENDPOINT = self.OIDC_OP_USER_ENDPOINT = ""
        self.basic_auth = True

    def get_settings(self, attr: str, *args: Any) -> Any:
        # How the client secret goes to the token endpoint is the provider's (discovery), not a setting.
        if attr == "OIDC_TOKEN_USE_BASIC_AUTH":
            return self.basic_auth
        return import_from_settings(attr, *args)

    def authenticate(self, request, *, oidc_nonce: str, oidc_code_verifier: str | None = None):
        """The user for the callback's ``code`` (``views.CallbackView`` checked its state and
        passes the nonce and PKCE verifier kept with it). Its keywords are the callback's
        alone, so a password's ``authenticate`` never reaches here. ``SignInRefused`` on any
        refusal, before anything is written."""
        self.request = request
        provider = discovery.provider()
        self.OIDC_OP_TOKEN_ENDPOINT = provider.token_endpoint
        self.OIDC_OP_JWKS_ENDPOINT = provider.jwks_uri
        self.OIDC_OP_USER_ENDPOINT = provider.userinfo_endpoint
        self.basic_auth = provider.basic_auth
        token = self._exchange(request.GET["code"], oidc_code_verifier)
        id_token, access_token = token.get("id_token"), token.get("access_token")
        if not isinstance(id_token, str):
            raise SignInRefused("the token endpoint's answer has no id_token")
        payload = self.verify_token(id_token, nonce=oidc_nonce)
        claims = {**payload, **self._userinfo(access_token, id_token, payload)}
        return identity_sign_in(issuer=settings.OIDC_ISSUER, claims=claims)

    # ModelBackend's: an inactive user's session signs nobody in (mozilla-django-oidc's would).
    get_user = ModelBackend.get_user

    def _exchange(self, code: str, code_verifier: str | None) -> dict[str, Any]:
        payload = {
            "client_id": self.OIDC_RP_CLIENT_ID,
            "client_secret": self.OIDC_RP_CLIENT_SECRET,
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": absolutify(self.request, reverse("oidc_authentication_callback")),
        }
        if code_verifier is not None:
            payload["code_verifier"] = code_verifier
        try:
            token = self.get_token(payload)
        except requests.HTTPError as exc:
            raise SignInRefused(f"the token endpoint refused the code: {exc}") from None
        except requests.RequestException as exc:
            raise discovery.unreachable(
                f"the token endpoint {self.OIDC_OP_TOKEN_ENDPOINT} did not answer: {exc}"
            ) from None
        except ValueError:
            raise SignInRefused("the token endpoint's answer is not JSON") from None
        if not isinstance(token, dict):
            raise SignInRefused("the token endpoint's answer is not a JSON object")
        return token

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        try:
            payload = super().verify_token(token, **kwargs)
        except SuspiciousOperation as exc:
            raise SignInRefused(ITS_REFUSALS.get(str(exc), f"the ID token was refused: {exc}")) from None
        except requests.RequestException as exc:
            raise discovery.unreachable(
                f"the provider's keys {self.OIDC_OP_JWKS_ENDPOINT} could not be read: {exc}"
            ) from None
        except (KeyError, TypeError, ValueError, jwt.PyJWTError) as exc:
            raise SignInRefused(f"the ID token or the provider's keys are malformed ({exc!r})") from None
        audiences = payload["aud"] if isinstance(payload["aud"], list) else [payload["aud"]]
        azp = payload.get("azp")
        if (len(audiences) > 1 or azp is not None) and azp != self.OIDC_RP_CLIENT_ID:
            raise SignInRefused(
                f"the ID token is for the audiences {audiences!r} and authorized party {azp!r}, "
                f"not for this client {self.OIDC_RP_CLIENT_ID!r} alone"
            )
        return payload

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        """The signature (mozilla-django-oidc's check), and every claim it leaves unchecked."""
        header, said = _unverified(payload)
        if header.get("alg") != ALGORITHM:
            raise SignInRefused(f"the ID token is signed with {header.get('alg')!r}, not {ALGORITHM}")
        try:
            return jwt.decode(
                payload,
                key,
                algorithms=[ALGORITHM],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.OIDC_ISSUER,
                leeway=LEEWAY_SECONDS,
                options={"require": REQUIRED_CLAIMS},
            )
        except jwt.PyJWTError as exc:
            raise SignInRefused(self._why(exc, header, said)) from None

    def _why(self, exc: jwt.PyJWTError, header: dict[str, Any], said: dict[str, Any]) -> str:
        """The refusal's reason, naming what the token said."""
        if isinstance(exc, jwt.InvalidSignatureError):
            return f"the ID token's signature does not verify with the provider's key {header.get('kid')!r}"
        if isinstance(exc, jwt.ExpiredSignatureError):
            return f"the ID token expired at {_when(said.get('exp'))} (leeway {LEEWAY_SECONDS} s)"
        if isinstance(exc, jwt.InvalidAudienceError):
            return f"the ID token is for {said.get('aud')!r}, not this client {self.OIDC_RP_CLIENT_ID!r}"
        if isinstance(exc, jwt.InvalidIssuerError):
            return f"the ID token was issued by {said.get('iss')!r}, not {settings.OIDC_ISSUER!r}"
        if isinstance(exc, jwt.MissingRequiredClaimError):
            return f"the ID token has no {exc.claim!r} claim"
        if isinstance(exc, jwt.ImmatureSignatureError):
            return f"the ID token is not valid yet (issued at {_when(said.get('iat'))})"
        return f"the ID token was refused: {exc}"

    def _userinfo(self, access_token: Any, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The userinfo endpoint's claims ({} without one); its ``sub`` must be the token's."""
        if not self.OIDC_OP_USER_ENDPOINT or not isinstance(access_token, str):
            return {}
        try:
            userinfo = self.get_userinfo(access_token, id_token, payload)
        except requests.RequestException as exc:
            raise discovery.unreachable(f"the userinfo endpoint {self.OIDC_OP_USER_ENDPOINT} failed: {exc}") from None
        except ValueError:
            raise SignInRefused("the userinfo endpoint's answer is not JSON") from None
        if not isinstance(userinfo, dict) or userinfo.get("sub") != payload["sub"]:
            sub = userinfo.get("sub") if isinstance(userinfo, dict) else None
            raise SignInRefused(f"the userinfo is about the subject {sub!r}, not the ID token's {payload['sub']!r}")
        return userinfo


def _unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The token's header and claims as it states them, unchecked: for naming a refusal only."""
    try:
        return jwt.get_unverified_header(token), jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return {}, {}


def _when(epoch: Any) -> str:
    if isinstance(epoch, int | float) and not isinstance(epoch, bool):
        return f"{dt.datetime.fromtimestamp(epoch, dt.UTC):%Y-%m-%d %H:%M:%S} UTC"
    return repr(epoch)
