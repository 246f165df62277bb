from django.apps import AppConfig

# manage.py commands that start with no check of the groups KEEL_WORKFLOW_ACCESS names.
MAKES_GROUPS = {"migrate", "shell", "dbshell", "createsuperuser", "changepassword", "loaddata"}


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
        refused = self._access_refusal(registry)
        if refused:
            raise SystemExit(f"keel: {refused}")

    @staticmethod
    def _access_refusal(registry) -> str | None:
        """Why ``KEEL_WORKFLOW_ACCESS`` can't be used (None: it can): a workflow no module
        declares, or a group the database doesn't have (checked once the database holds
        the groups table; the commands that set up the database and its people are let
        through, so the groups can be made)."""
        import sys
        import warnings

        from django.conf import settings
        from django.contrib.auth.models import Group
        from django.db import DatabaseError

        from access import rules

        if not settings.KEEL_WORKFLOW_ACCESS:
            return None
        for workflow in settings.KEEL_WORKFLOW_ACCESS:
            if not registry.versions(workflow):
                return f"KEEL_WORKFLOW_ACCESS names the workflow {workflow!r}, which no workflow module declares"
        if sys.argv[1:2] and sys.argv[1] in MAKES_GROUPS:  # the commands that set up the database and its people
            return None
        named = rules.groups_named()
        try:
            with warnings.catch_warnings():  # a query at start-up on purpose: a wrong name must stop it here
                warnings.simplefilter("ignore", RuntimeWarning)
                known = set(Group.objects.filter(name__in=named).values_list("name", flat=True))
        except DatabaseError:  # no database yet, or not migrated: nothing to check against
            return None
        missing = sorted(named - known)
        if missing:
            return (
                f"KEEL_WORKFLOW_ACCESS names the group {missing[0]!r}, which keel doesn't have: create it first "
                f'(python manage.py shell -c "from django.contrib.auth.models import Group; '
                f"Group.objects.create(name='{missing[0]}')\"), or correct the name"
            )
        return None

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
