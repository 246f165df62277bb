from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"

    def ready(self) -> None:
        from . import gate  # noqa: F401 - registers the approval gate with the runtime
