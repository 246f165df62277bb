"""Single sign-on through OpenID Connect: keel as a relying party of one provider.

On when ``OIDC_ISSUER`` is set (config/settings.py; docs/operations.md, "Single sign-on").
mozilla-django-oidc does the authorization code flow (state, nonce, PKCE kept in the
session, the code exchange, the signature against the provider's JWKS); here are what it
leaves to its users: the endpoints from discovery (``discovery``), the rest of the ID
token's checks and the user matched by (issuer, subject) (``backend``), and every refusal
answered with the login page and one log line (``views``). Who the user becomes is
``accounts.identities``.
"""

from django.conf import settings


def configured() -> bool:
    return bool(settings.OIDC_ISSUER)
