"""``{% load identities %}``: who signed in through single sign-on, beside an actor.

``{{ actor|signed_in_through }}``: " (signed in through <issuer> as <subject>)" after one
actor (a user, a username, or an audit label ``user:<username>``), else nothing.
``{{ described|signed_in_as:actor }}``: the same from ``described_actors``' map, for a page
that names many actors (one query for them all, not one each).
"""

from django import template

from accounts.identities import described_actors, identity_described

register = template.Library()


@register.filter
def signed_in_through(actor) -> str:
    if isinstance(actor, str):
        described = described_actors([actor]).get(actor, "")
    else:
        described = identity_described(actor)
    return f" ({described})" if described else ""


@register.filter
def signed_in_as(described: dict[str, str], actor) -> str:
    found = described.get(str(actor), "") if described else ""
    return f" ({found})" if found else ""
