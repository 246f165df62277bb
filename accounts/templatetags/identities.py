"""``{% load identities %}{{ actor|signed_in_through }}``: " (signed in through <issuer> as
<subject>)" after an actor who signs in through single sign-on, else nothing. ``actor`` is a
user, a username, or an audit label ``user:<username>``."""

from django import template
from django.contrib.auth import get_user_model

from accounts.identities import identity_described

register = template.Library()


@register.filter
def signed_in_through(actor) -> str:
    if isinstance(actor, str):
        actor = get_user_model().objects.filter(username=actor.removeprefix("user:")).first()
    described = identity_described(actor)
    return f" ({described})" if described else ""
