from __future__ import annotations

import contextlib
import io
import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import DatabaseError
from django.db.backends.signals import connection_created
from django.dispatch import receiver

from accounts.roles import ensure_roles
from accounts.tokens import api_token_create
from tests.support import file_weights
from tests.support.procs import PgBouncer, http
from tests.support.stack import APP_DB_ROLE, Sandbox, SharedStack, SharedStacks, Stack, outbox_env

# Fixtures more than one test folder uses (a folder's own are in its conftest.py).
pytest_plugins = ["tests.support.gate_fixtures", "tests.support.browsing"]

# Fixtures that start keel's processes (or need them): their tests are marked ``processes``.
# ``keel`` is the author's kit as docs/authoring.md names its fixture (tests/examples).
PROCESS_FIXTURES = {
    "stack",
    "sandbox",
    "run_sandbox",
    "shared_stacks",
    "world",
    "web_stack",
    "run_pgbouncer",
    "keel",
    "pydantic_keel",
    "mcp_keel",
}
# KEEL_TEST_PGBOUNCER=1: every stack's processes connect through the run's PgBouncer in
# transaction mode (issue 24; S46 runs the worker-killing scenarios so in every run).
THROUGH_PGBOUNCER = bool(os.environ.get("KEEL_TEST_PGBOUNCER"))


# An author's project, run in a pytest of its own by tests/integration/test_authoring_kit.py.
collect_ignore = ["support/kit_project"]

# What a test file not in tests/file_weights.txt is taken to weigh (new files: most are small).
UNLISTED_FILE_SECONDS = 3.0


def _stack_order(item) -> int:
    """0: no stack, 1: the shared stack, 2: a stack of its own."""
    if "stack" not in getattr(item, "fixturenames", ()):
        return 0
    return 2 if item.get_closest_marker("own_stack") else 1


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Mark the tests that start processes (before ``-m`` selects)."""
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.processes)


class _StackOrder:
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items) -> None:
        """The heaviest files first (tests/file_weights.txt: with ``--dist loadfile`` each
        pytest process takes whole files in this order, so the long ones start early and
        the run ends on short ones). Within a file, those without a stack first, then those
        on the shared stack, then those with their own, so a module starts its shared stack
        once. A file's tests stay in pytest-django's order otherwise (sorts are stable)."""
        weights = file_weights.read()
        root = Path(str(config.rootpath))

        def weight(item) -> float:
            return weights.get(Path(str(item.path)).relative_to(root).as_posix(), UNLISTED_FILE_SECONDS)

        position = {}
        for item in items:
            position.setdefault(item.module, len(position))
        items.sort(key=lambda item: (-weight(item), position[item.module], _stack_order(item)))


def pytest_configure(config) -> None:
    config.pluginmanager.register(_StackOrder(), "keel-stack-order")
    # The author's kit (executions.authoring.testing) starts its processes as the stacks do here:
    # forked from this pytest process's preloaded interpreter (tests/support/forkserver.py),
    # telling people by e-mail and other systems by webhook to the run's receivers, as
    # production does (a test's own env= still wins).
    from executions.authoring.testing import processes as kit_processes
    from tests.support import forkserver
    from tests.support.stack import outbox_env

    def spawn(argv, env, log):
        return forkserver.spawn(argv, env={**outbox_env(), **env}, cwd=Path.cwd(), log=log)

    kit_processes.spawn = spawn


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database, plus the application's role with exactly its production rights:
    the processes of tests/support/stack.py connect as it (docs/operations.md, Security)."""
    with django_db_blocker.unblock():
        call_command("grant_app_role", APP_DB_ROLE, stdout=io.StringIO())


@dataclass
class Person:
    user: Any
    token: str
    password: str


@pytest.fixture
def people(transactional_db) -> dict[str, Person]:
    """One user per role, plus a requester and an outsider, each with an API token."""
    ensure_roles()  # transactional tests truncate tables, groups included
    User = get_user_model()
    out = {}
    for name, group in [
        ("requester", None),
        ("manager", "managers"),
        ("manager2", "managers"),
        ("operator", "operators"),
        ("auditor", "auditors"),
        ("outsider", None),
    ]:
        password = f"pw-{name}-{uuid.uuid4().hex[:6]}"
        user = User.objects.create_user(username=name, password=password, email=f"{name}@example.com")
        if group:
            user.groups.add(Group.objects.get(name=group))
        out[name] = Person(user=user, token=api_token_create(user=user), password=password)
    return out


@receiver(connection_created)
def _flushes_outwait_the_stacks(sender, connection, **kwargs) -> None:
    """A shared stack's workers keep sweeping while pytest-django flushes the database
    between tests. Should a sweep and the flush's TRUNCATE deadlock, the sweep must be
    the one PostgreSQL cancels (the next sweep comes a second later): the backend that
    checks for a deadlock first is cancelled, so this one, the test thread's, checks last
    (a setting for superusers: as another role, PostgreSQL's default stays)."""
    if connection.vendor == "postgresql" and threading.current_thread() is threading.main_thread():
        with connection.cursor() as cursor, contextlib.suppress(DatabaseError):
            cursor.execute("SET deadlock_timeout = '30s'")


def _failed(request) -> bool:
    return getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed


@pytest.fixture(scope="session")
def run_sandbox(tmp_path_factory):
    """The sandbox of the whole test run (tests/support/stack.py), started once."""
    sandbox = Sandbox(tmp_path_factory.mktemp("sandbox"))
    yield sandbox
    sandbox.close()


@pytest.fixture
def sandbox(run_sandbox) -> Sandbox:
    """The run's sandbox, emptied for this test: no orders, publications, faults or stats of another."""
    run_sandbox.reset()
    return run_sandbox


_SHARED: list[SharedStacks] = []  # the session's, once a test asked for it


@pytest.fixture(scope="session")
def run_pgbouncer(tmp_path_factory):
    """A PgBouncer in transaction mode in front of the test server, for the whole run
    (tests/support/procs.py), started the first time a test asks for it."""
    bouncer = PgBouncer(tmp_path_factory.mktemp("pgbouncer"))
    bouncer.start()
    yield bouncer
    bouncer.close()


@pytest.fixture(scope="session")
def shared_stacks(request, run_sandbox, tmp_path_factory):
    pooler = request.getfixturevalue("run_pgbouncer") if THROUGH_PGBOUNCER else None
    stacks = SharedStacks(run_sandbox, tmp_path_factory, pooler=pooler)
    _SHARED.append(stacks)
    yield stacks
    stacks.close()


@pytest.fixture(scope="session", autouse=True)
def _told_as_production_tells():
    """This pytest process tells people and systems as the stacks' processes and production
    do: by SMTP and signed webhooks, to the run's receivers (tests/support/stack.outbox_env).
    So a test that plans or sends in this process (the notifications' planner, a page's
    remind) meets e-mail and webhooks on, never a quieter configuration."""
    from django.conf import settings

    told = outbox_env()
    settings.KEEL_NOTIFICATIONS = True
    settings.EMAIL_HOST, settings.EMAIL_PORT = told["EMAIL_HOST"], int(told["EMAIL_PORT"])
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.KEEL_WEBHOOK_URL, settings.KEEL_WEBHOOK_SECRET = told["KEEL_WEBHOOK_URL"], told["KEEL_WEBHOOK_SECRET"]
    settings.SECRETS = {**settings.SECRETS, "KEEL_WEBHOOK_SECRET": told["KEEL_WEBHOOK_SECRET"]}  # as settings.py does
    yield


@pytest.fixture(scope="module", autouse=True)
def _one_shared_stack_per_module():
    """The shared stack ends with its module: an idle one would sweep through every test after it."""
    yield
    for stacks in _SHARED:
        stacks.close()


@pytest.fixture(autouse=True)
def _no_shared_stack_unless_asked(request):
    """A test that uses no stack runs with none: no shared worker takes the executions it makes."""
    if "stack" not in request.fixturenames:
        for stacks in _SHARED:
            stacks.close()


@pytest.fixture
def stack(request, transactional_db, sandbox, shared_stacks, tmp_path):
    """The test's processes: ``stack.up(...)`` on the shared stack, or, for a test marked
    ``own_stack`` (it kills, stops or configures processes), a ``Stack`` of its own."""
    if request.node.get_closest_marker("own_stack") is None:
        handle = SharedStack(shared_stacks)
        yield handle
        if _failed(request):
            print(handle.logs())
        handle.finish()
        return
    shared_stacks.close()  # one consumer per queue: the shared stack's workers are gone first
    own = Stack(tmp_path, sandbox, pooler=request.getfixturevalue("run_pgbouncer") if THROUGH_PGBOUNCER else None)
    yield own
    own.close()
    if _failed(request):
        print(own.logs())


class ApiClient:
    """The Task API over real HTTP, as one person."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base = base_url.rstrip("/") + "/api"
        self.session = http(token)

    def post(self, path: str, body: dict) -> Any:
        return self.session.post(self.base + path, json=body, timeout=15)

    def get(self, path: str) -> Any:
        return self.session.get(self.base + path, timeout=15)

    def start(self, month: str = "2026-08", **extra: Any) -> dict:
        response = self.post("/executions", {"workflow": "monthly_report", "input": {"month": month}, **extra})
        assert response.status_code in (200, 201), response.text
        return response.json()

    def execution(self, ref: str) -> dict:
        response = self.get(f"/executions/{ref}")
        assert response.status_code == 200, response.text
        return response.json()

    def decide(self, ref: str, approval: dict, decision: str = "approve", event_id: str | None = None, **over: Any):
        body = {
            "type": "approval.decision",
            "approval_id": approval["id"],
            "decision": decision,
            "artifact_version": approval["artifact_version"],
            "content_sha256": approval["content_sha256"],
            "event_id": event_id or uuid.uuid4().hex,
            **over,
        }
        return self.post(f"/executions/{ref}/events", body)

    def signal(self, ref: str, name: str, payload: Any = None, event_id: str | None = None):
        body = {"type": "signal", "name": name, "payload": payload, "event_id": event_id or uuid.uuid4().hex}
        return self.post(f"/executions/{ref}/events", body)


@pytest.fixture
def api_as(stack):
    def make(person: Person) -> ApiClient:
        assert stack.web_url, "start the web process first (stack.web())"
        return ApiClient(stack.web_url, person.token)

    return make
