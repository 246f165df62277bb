from django.conf import settings

from executions.runtime import get_model_client

from .page import Nav


def runtime(request) -> dict:
    client = get_model_client()
    return {
        "model_label": client.label,
        "model_offline": client.offline,
        "poll_ms": settings.DASHBOARD_POLL_MS,
        # A poll still unanswered after this long is given up (htmx's timeout): the page
        # says it is stale instead of waiting on a server that hangs.
        "poll_timeout_ms": max(2 * settings.DASHBOARD_POLL_MS, 5000),
        # Read only when a template shows it (the nav's inbox count and the page's poll).
        "nav": Nav(getattr(request, "user", None)),
    }
