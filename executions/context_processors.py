from django.conf import settings

from .modelclient import get_model_client


def runtime(request) -> dict:
    client = get_model_client()
    return {"model_label": client.label, "model_offline": client.offline, "poll_ms": settings.DASHBOARD_POLL_MS}
