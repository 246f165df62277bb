"""Settings for pytest: PostgreSQL and Redis (never the embedded default), fast hashing.

Subprocesses the tests start (workers, beat, web, sandbox) run ``config.settings``
with the test database's URL passed in the environment.
"""

import os
import tempfile

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/keel")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")
# Playwright's sync API runs an event loop in the test thread; Django's ORM refuses
# to run there unless told. Test settings only.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("KEEL_VAR_DIR", tempfile.mkdtemp(prefix="keel-test-"))

from .settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DASHBOARD_POLL_MS = 500
# Close connections after each request, so the live server leaves none behind.
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405


class InvalidTemplateVariable:
    """``string_if_invalid`` for tests: a variable a template can't resolve fails the test.

    Django formats the setting with the variable's name when it contains ``%s``;
    formatting raises instead, so ``{{ a.missing }}`` is an error, never a blank.
    (``{% if %}`` and ``{% for %}`` ignore failures by design and stay usable.)
    """

    def __contains__(self, item: str) -> bool:
        return item == "%s"

    def __mod__(self, name: object):
        from django.template import TemplateSyntaxError

        raise TemplateSyntaxError(f"template variable {name!r} does not resolve")


TEMPLATES[0]["OPTIONS"]["string_if_invalid"] = InvalidTemplateVariable()  # noqa: F405
