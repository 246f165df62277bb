from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "executions"
    verbose_name = "Executions"

    def ready(self) -> None:
        from . import waits  # noqa: F401 - importing waits registers the wait gate
        from .authoring import registry

        registry.load_configured_workflows()
