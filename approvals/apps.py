from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"

    def ready(self) -> None:
        from . import events, gate  # noqa: F401 - register the approval gate and its event type with the runtime
