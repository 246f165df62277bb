"""Who may read the measures (docs/design.md §6): the API and the page — operators, managers and
auditors; ``/metrics`` — operators and auditors, or the scrape token."""

from __future__ import annotations

import hmac

from django.conf import settings

OPERATE = "executions.operate_execution"
DECIDE = "approvals.decide_approval"
AUDIT = "approvals.view_audit"


def may_read(user) -> bool:
    """The API's /api/metrics and the metrics page."""
    return bool(user and user.is_authenticated and any(user.has_perm(p) for p in (OPERATE, DECIDE, AUDIT)))


def may_scrape(user) -> bool:
    """``/metrics`` for a person's token."""
    return bool(user and user.is_authenticated and (user.has_perm(OPERATE) or user.has_perm(AUDIT)))


def is_scrape_token(token: str) -> bool:
    """``RUNTIME_METRICS_TOKEN``, compared in constant time; never true when it is unset."""
    expected = settings.RUNTIME_METRICS_TOKEN
    return bool(expected) and hmac.compare_digest(token.encode(), expected.encode())
