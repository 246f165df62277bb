"""Times as the console shows them: to the second and in UTC, wherever a fact may be
thirty seconds old (a lease, a retry, a time in state). Django's ``timesince`` counts
in minutes ("0 minutes" for a lease that lapsed 25 s ago); these don't.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils import timezone

register = template.Library()

_UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))


def span(seconds: float) -> str:
    """A duration in its two largest units, to the second: ``45 s``, ``3 min 12 s``,
    ``2 h 5 min``, ``3 d 4 h``."""
    left = max(0, int(seconds))
    parts = []
    for unit, size in _UNITS:
        if left >= size or (unit == "s" and not parts):
            amount, left = divmod(left, size)
            parts.append(f"{amount} {unit}")
        elif parts:
            parts.append("")  # a zero unit still counts as one of the two
        if len(parts) == 2:
            break
    return " ".join(p for p in parts if p)


@register.filter
def utc(moment: datetime | None) -> str:
    """``2026-12-01 03:17:11 UTC``; an empty value is ``—``."""
    if not moment:
        return "—"
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


@register.filter
def ago(moment: datetime | None) -> str:
    """How long ago ``moment`` was (``45 s``, ``3 min 12 s``); in the future, ``0 s``."""
    return span((timezone.now() - moment).total_seconds()) if moment else "—"


@register.filter
def until(moment: datetime | None) -> str:
    """How long until ``moment`` (``20 s``); passed, ``0 s``."""
    return span((moment - timezone.now()).total_seconds()) if moment else "—"
