from __future__ import annotations

import io
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command

from accounts.roles import ensure_roles
from accounts.tokens import api_token_create
from tests.support.procs import http
from tests.support.stack import APP_DB_ROLE, Stack


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


@pytest.fixture
def stack(request, transactional_db, tmp_path):
    s = Stack(tmp_path)
    yield s
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    s.close()
    if failed:
        print(s.logs())


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
