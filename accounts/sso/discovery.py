"""The provider's endpoints, from its discovery document
(``{OIDC_ISSUER}/.well-known/openid-configuration``, OpenID Connect Discovery 1.0).

Read at the first sign-in that needs it and kept for the life of the process. A failure is
never kept: the next sign-in asks again, so keel starts, and draws its login page, while
the provider is down. The document must name ``OIDC_ISSUER`` as its ``issuer``, exactly;
one that names another is refused (a mix-up of providers, or a typo in the setting).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from django.conf import settings

from accounts.identities import SignInRefused

UNREACHABLE = (
    "The single sign-on provider ({host}) can't be reached right now: try again in a minute, or ask an administrator."
)
MISCONFIGURED = "Single sign-on is not set up correctly ({host}): ask an administrator."


@dataclass(frozen=True, kw_only=True)
class Provider:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str  # "" when the provider has none: the ID token's claims alone
    basic_auth: bool  # the client authenticates at the token endpoint by HTTP Basic, else in the body


_known: Provider | None = None


def provider() -> Provider:
    """The configured provider's endpoints; ``SignInRefused`` when they can't be had."""
    global _known
    if _known is None or _known.issuer != settings.OIDC_ISSUER:
        _known = _discover(settings.OIDC_ISSUER)
    return _known


def forget() -> None:
    """Read the document again at the next sign-in (tests; a provider that moved its endpoints)."""
    global _known
    _known = None


def host() -> str:
    return urlsplit(settings.OIDC_ISSUER).netloc


def unreachable(reason: str) -> SignInRefused:
    return SignInRefused(reason, UNREACHABLE.format(host=host()))


def _discover(issuer: str) -> Provider:
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        answer = requests.get(url, timeout=settings.OIDC_TIMEOUT, headers={"Accept": "application/json"})
        answer.raise_for_status()
        document = answer.json()
    except requests.RequestException as exc:
        raise unreachable(f"the provider's discovery document {url} could not be read: {exc}") from None
    except ValueError:
        raise unreachable(f"the provider's discovery document {url} is not JSON") from None
    if not isinstance(document, dict):
        raise unreachable(f"the provider's discovery document {url} is not a JSON object")
    if document.get("issuer") != issuer:
        raise SignInRefused(
            f"the discovery document {url} names the issuer {document.get('issuer')!r}, not OIDC_ISSUER {issuer!r}",
            MISCONFIGURED.format(host=host()),
        )
    endpoints = ("authorization_endpoint", "token_endpoint", "jwks_uri")
    missing = [name for name in endpoints if not _is_url(document.get(name))]
    if missing:
        raise SignInRefused(f"the discovery document {url} has no {missing[0]}", MISCONFIGURED.format(host=host()))
    # Discovery's default is client_secret_basic; some providers take the secret in the body only.
    methods = document.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    if "client_secret_basic" not in methods and "client_secret_post" not in methods:
        raise SignInRefused(
            f"the provider takes no client secret at its token endpoint (it supports {methods})",
            MISCONFIGURED.format(host=host()),
        )
    userinfo = document.get("userinfo_endpoint")
    return Provider(
        issuer=issuer,
        authorization_endpoint=document["authorization_endpoint"],
        token_endpoint=document["token_endpoint"],
        jwks_uri=document["jwks_uri"],
        userinfo_endpoint=userinfo if isinstance(userinfo, str) and _is_url(userinfo) else "",
        basic_auth="client_secret_basic" in methods,
    )


def _is_url(value: object) -> bool:
    return isinstance(value, str) and urlsplit(value).scheme in ("https", "http") and bool(urlsplit(value).netloc)
