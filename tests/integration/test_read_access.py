"""Who may read what (issue 11, docs/design.md §6): any signed-in user reads every execution —
not only their own — through the API and the pages; anonymous users read nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from executions.models import Execution


@pytest.fixture
def others_execution(people) -> Execution:
    return Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={"month": "2026-08"},
        input_digest="d",
        created_by=people["manager"].user,
    )


def test_any_signed_in_user_reads_any_execution(people, others_execution):
    ref = others_execution.ref
    for name in ("requester", "outsider", "auditor"):
        api = Client().get(f"/api/executions/{ref}", HTTP_AUTHORIZATION=f"Bearer {people[name].token}")
        assert api.status_code == 200 and api.json()["created_by"] == "manager", name
        listed = Client().get("/api/executions", HTTP_AUTHORIZATION=f"Bearer {people[name].token}")
        assert ref in [item["id"] for item in listed.json()["items"]], name

        page = Client()
        page.force_login(people[name].user)
        detail = page.get(f"/executions/{ref}/")
        assert detail.status_code == 200 and ref in detail.content.decode(), name
        assert ref in page.get("/").content.decode(), name


def test_anonymous_reads_nothing(people, others_execution):
    ref = others_execution.ref
    for path in (f"/api/executions/{ref}", "/api/executions", "/api/executions/summary"):
        response = Client().get(path)
        assert response.status_code == 401 and "authentication required" in response.json()["detail"], path
    for path in (f"/executions/{ref}/", "/"):
        response = Client().get(path)
        assert response.status_code == 302 and response.url.startswith("/login/"), path
    bad = Client().get(f"/api/executions/{ref}", HTTP_AUTHORIZATION="Bearer keel_not-a-token")
    assert bad.status_code == 401
