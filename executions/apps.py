from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "executions"
    verbose_name = "Executions"

    def ready(self) -> None:
        """Plug the rooms into the engine, then load the workflows: the wait gate and its
        event type (``waits``), the model, agent and route step kinds (``agent.kinds``). The
        engine never imports them; they register themselves on import."""
        from . import (
            children,  # noqa: F401 - registers the children gate and wakes parents
            questions,  # noqa: F401 - registers the input gate and the input.answer event type
            waits,  # noqa: F401 - registers the wait gate and the signal event type
        )
        from .agent import kinds  # noqa: F401 - registers the model, agent and route step kinds
        from .authoring import registry

        self._observed()

        try:
            registry.load_configured_workflows()
        except registry.WorkflowModuleError as exc:
            # Start-up stops (web, worker, beat, manage.py) with one sentence, no traceback.
            raise SystemExit(f"keel: {exc}") from None

    @staticmethod
    def _observed() -> None:
        """Traces and errors, each only when configured (settings: OTEL_*, SENTRY_DSN)."""
        from django.conf import settings

        if settings.TRACING:
            from .engine import tracing

            tracing.start(service_name=settings.OTEL_SERVICE_NAME, content=settings.KEEL_TRACE_CONTENT)
        if settings.SENTRY_DSN:
            from .engine import sentry

            sentry.start(dsn=settings.SENTRY_DSN)
