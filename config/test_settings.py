"""Settings for pytest: PostgreSQL and Redis (never the embedded default), fast hashing.

Subprocesses the tests start (workers, beat, web, sandbox) run ``config.settings``
with the test database's URL passed in the environment.
"""

import os
import tempfile

from django.core.exceptions import ImproperlyConfigured

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/keel")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")
# Each pytest process owns a Redis database (its stacks flush it): under pytest-xdist
# CELERY_BROKER_URL lists one per process, comma-separated, gw0's first, and each takes
# its own (the list is kept for the processes xdist starts). The test database gets
# pytest-django's per-process suffix: test_<name>_gw0, …
_brokers = os.environ.setdefault("KEEL_TEST_BROKER_URLS", os.environ["CELERY_BROKER_URL"]).split(",")
_process = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
if _process >= len(_brokers):
    raise ImproperlyConfigured(
        f"pytest process {_process + 1} has no Redis database of its own: CELERY_BROKER_URL lists "
        f"{len(_brokers)} ({','.join(_brokers)}); give one per process (-n), comma-separated."
    )
os.environ["CELERY_BROKER_URL"] = _brokers[_process]
# Playwright's sync API runs an event loop in the test thread; Django's ORM refuses
# to run there unless told. Test settings only.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("KEEL_VAR_DIR", tempfile.mkdtemp(prefix="keel-test-"))

from .settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DASHBOARD_POLL_MS = 500
# Close connections after each request, so the live server leaves none behind.
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
# keel's PostgreSQL backend (config.database), emptied between tests with DELETE instead of TRUNCATE (its docstring).
# The package is an app too: its flush command replaces Django's (it skips post_migrate when
# that would change nothing).
if DATABASES["default"]["ENGINE"] == "config.database":  # noqa: F405
    DATABASES["default"]["ENGINE"] = "tests.support.flushing_postgres"  # noqa: F405
    INSTALLED_APPS = [*INSTALLED_APPS, "tests.support.flushing_postgres"]  # noqa: F405


class UnknownTemplateVariable(str):
    """``string_if_invalid`` that fails the render where Django would print nothing.

    A variable missing from the context, or a lookup that fails silently (a missing
    related object), raises when printed. It is falsy, so ``{% if %}`` and
    ``|default`` behave exactly as with the usual "".
    """

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        import sys

        from django.template import TemplateSyntaxError

        frame, where = sys._getframe(1), "?"
        while frame is not None:  # name the {{ … }} being printed, and its template
            node = frame.f_locals.get("self")
            if hasattr(node, "filter_expression") and hasattr(node, "origin"):
                where = f"{{{{ {node.filter_expression.token} }}}} in {node.origin.template_name}"
                break
            frame = frame.f_back
        raise TemplateSyntaxError(f"a template printed a variable that does not resolve: {where}")


TEMPLATES[0]["OPTIONS"]["string_if_invalid"] = UnknownTemplateVariable("")  # noqa: F405
