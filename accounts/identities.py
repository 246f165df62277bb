"""Who a person is at the OpenID provider, and what that makes them here.

``identity_sign_in`` is the one writer of ``Identity`` and of the groups single sign-on
manages. It finds the user by the provider's (issuer, subject) and by nothing else — never
by e-mail or username — or creates both, then makes the user's managed groups exactly what
the groups claim says, at every sign-in. Everything is checked before anything is written:
a refusal (``SignInRefused``) leaves no user, no identity and no group changed.

The managed groups are the roles ``OIDC_ROLE_MAP`` maps to and every group name
``KEEL_WORKFLOW_ACCESS`` uses; a group outside them is left as an administrator set it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import IntegrityError, transaction
from django.utils import timezone

from access import rules

from .models import Identity
from .roles import ROLES

# Django's username: letters, digits and @.+-_, at most 150 characters.
USERNAME = re.compile(r"^[\w.@+-]{1,150}\Z")
NOT_IN_USERNAME = re.compile(r"[^\w.@+-]+")
SUBJECT_MAX = Identity._meta.get_field("subject").max_length or 255
REFUSED = "Single sign-on did not sign you in: the provider's answer could not be trusted. Try again, or ask an administrator."


class SignInRefused(Exception):
    """A sign-in through the provider refused. ``reason`` names why, for the log (one
    warning line); ``sentence`` is what the person reads on the login page. Nothing was
    written."""

    def __init__(self, reason: str, sentence: str = REFUSED) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sentence = sentence


def access_groups() -> set[str]:
    """The groups access by workflow names, but keel's roles: a role comes from the role map
    alone, never from a provider group that happens to bear its name."""
    return rules.groups_named() - set(ROLES)


def managed_groups() -> set[str]:
    """The groups single sign-on decides: the roles the map names, and the access groups."""
    return set(settings.OIDC_ROLE_MAP.values()) | access_groups()


def groups_for(claimed: list[str]) -> set[str]:
    """The managed groups a user with the provider's groups ``claimed`` belongs to."""
    role_map, access = settings.OIDC_ROLE_MAP, access_groups()
    return {role_map[name] for name in claimed if name in role_map} | {name for name in claimed if name in access}


def claimed_groups(claims: Mapping[str, Any]) -> list[str]:
    """The groups claim (``OIDC_GROUPS_CLAIM``) as a list of names: absent is none, one name
    is a list of one; anything else is refused."""
    name = settings.OIDC_GROUPS_CLAIM
    value = claims.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    raise SignInRefused(f"the {name!r} claim is not a list of group names: {str(value)[:200]!r}")


def described_actors(actors: Iterable[Any]) -> dict[str, str]:
    """``{actor: "signed in through <issuer> as <subject>"}`` for each actor (a username, or an
    audit label ``user:<username>``) who signs in through single sign-on, in one query."""
    names = {str(a): str(a).removeprefix("user:") for a in actors if a}
    found = Identity.objects.filter(user__username__in=set(names.values())).select_related("user")
    by_name = {identity.user.get_username(): str(identity) for identity in found}
    return {actor: by_name[name] for actor, name in names.items() if name in by_name}


def identity_described(user: AbstractBaseUser | None) -> str:
    """ "signed in through <issuer> as <subject>" for a user of single sign-on, else ""."""
    if user is None or not getattr(user, "pk", None):
        return ""
    identity = Identity.objects.filter(user_id=user.pk).first()
    return str(identity) if identity is not None else ""


@transaction.atomic
def identity_sign_in(*, issuer: str, claims: Mapping[str, Any]) -> AbstractBaseUser:
    """The user the provider ``issuer`` vouches for with ``claims`` (the ID token's, with
    the userinfo's over them), created on the first sign-in, their e-mail and managed
    groups brought up to date. Raises ``SignInRefused`` before writing anything."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject or len(subject) > SUBJECT_MAX:
        raise SignInRefused(f"the subject (sub) {str(subject)[:80]!r} is not a string of 1 to {SUBJECT_MAX} characters")
    wanted = groups_for(claimed_groups(claims))
    email = _email(claims)
    identity = (
        Identity.objects.select_for_update().select_related("user").filter(issuer=issuer, subject=subject).first()
    )
    if identity is not None and not identity.user.is_active:
        raise SignInRefused(
            f"{identity.user.get_username()} ({identity}) is deactivated in keel",
            "Your keel account is deactivated: ask an administrator.",
        )
    if identity is None:
        identity = _first_sign_in(issuer=issuer, subject=subject, claims=claims, email=email)
    user = identity.user
    if email and user.email != email:
        user.email = email
        user.save(update_fields=["email"])
    _follow(user, wanted)
    identity.signed_in_at = timezone.now()
    identity.save(update_fields=["signed_in_at"])
    return user


def _first_sign_in(*, issuer: str, subject: str, claims: Mapping[str, Any], email: str) -> Identity:
    User = get_user_model()
    for _ in range(3):  # another first sign-in may take the name (or the subject) meanwhile
        try:
            with transaction.atomic():
                user = User.objects.create_user(_free_username(issuer, subject, claims), email=email)
                return Identity.objects.create(user=user, issuer=issuer, subject=subject, signed_in_at=timezone.now())
        except IntegrityError:
            found = Identity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
            if found is not None:
                return found
    raise SignInRefused(f"no free username for {subject!r} after three tries")


def _free_username(issuer: str, subject: str, claims: Mapping[str, Any]) -> str:
    """``preferred_username`` when it is a valid username nobody has (in any case); else a
    name made from it (or the e-mail's local part) and a digest of the identity."""
    User = get_user_model()
    taken = User.objects.filter
    preferred = claims.get("preferred_username")
    if isinstance(preferred, str) and USERNAME.match(preferred) and not taken(username__iexact=preferred).exists():
        return preferred
    email = claims.get("email")
    base = preferred if isinstance(preferred, str) else email.split("@")[0] if isinstance(email, str) else ""
    base = NOT_IN_USERNAME.sub("-", base).strip("-")[:100] or "user"
    digest = hashlib.sha256(f"{issuer}\n{subject}".encode()).hexdigest()
    for length in (8, 16, 32):
        candidate = f"{base}-{digest[:length]}"
        if not taken(username__iexact=candidate).exists():
            return candidate
    return f"sso-{digest}"


def _email(claims: Mapping[str, Any]) -> str:
    email = claims.get("email")
    return email if isinstance(email, str) and "@" in email and len(email) <= 254 else ""


def _follow(user: AbstractBaseUser, wanted: set[str]) -> None:
    """The user's managed groups become exactly ``wanted``; their other groups stay."""
    managed = managed_groups() | wanted
    current = set(user.groups.filter(name__in=managed).values_list("name", flat=True))
    if current - wanted:
        user.groups.remove(*Group.objects.filter(name__in=current - wanted))
    for name in sorted(wanted - current):
        user.groups.add(Group.objects.get_or_create(name=name)[0])
