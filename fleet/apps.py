from django.apps import AppConfig


class FleetConfig(AppConfig):
    """The worker registry (issue 24): each worker process heartbeats a row; the API,
    the Workers page and ``no_worker``'s detail read it."""

    name = "fleet"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from executions import runtime

        from . import heartbeat, registry

        runtime.set_consumers(registry.live_queues)
        heartbeat.connect_signals()
