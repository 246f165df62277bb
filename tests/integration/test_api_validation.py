"""Malformed API input: 422 naming the field, and nothing written. Auth: 401/403."""

from __future__ import annotations

import pytest
from django.test import Client

from approvals.models import Decision
from executions.models import Execution, ExecutionEvent


def bearer(person) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {person.token}"}


@pytest.fixture
def client() -> Client:
    return Client()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": {"month": "2026-08"}}, "workflow"),
        ({"workflow": "no_such_flow", "input": {"month": "2026-08"}}, "workflow"),
        ({"workflow": "monthly_report", "input": {}}, "month"),
        ({"workflow": "monthly_report", "input": {"month": "2026-12"}}, "month"),
        ({"workflow": "monthly_report", "input": {"month": "August"}}, "month"),
        ({"workflow": "monthly_report", "input": {"month": "2026-08", "colour": "red"}}, "colour"),
        ({"workflow": "monthly_report", "input": "2026-08"}, "input"),
        (
            {"workflow": "monthly_report", "input": {"month": "2026-08"}, "idempotency_key": "k" * 201},
            "idempotency_key",
        ),
        ({"workflow": "monthly_report", "input": {"month": "2026-08", "constraints": [""]}}, "constraints"),
    ],
)
def test_malformed_start_is_422_naming_the_field_and_writes_nothing(client, people, body, field):
    response = client.post("/api/executions", body, content_type="application/json", **bearer(people["requester"]))
    assert response.status_code == 422, response.content
    detail = response.json()["detail"]
    assert any(field in [str(part) for part in error["loc"]] for error in detail), detail
    assert all(error["msg"] for error in detail)
    assert Execution.objects.count() == 0
    assert ExecutionEvent.objects.count() == 0


def test_unknown_month_reason_says_what_the_snapshot_covers(client, people):
    response = client.post(
        "/api/executions",
        {"workflow": "monthly_report", "input": {"month": "2026-12"}},
        content_type="application/json",
        **bearer(people["requester"]),
    )
    assert response.json()["detail"][0]["msg"] == "2026-12 is not in retail_snapshot_v1 (covers 2026-01 to 2026-10)"


def test_body_that_is_not_json_is_422(client, people):
    response = client.post(
        "/api/executions", "{not json", content_type="application/json", **bearer(people["requester"])
    )
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == ["body"]
    assert Execution.objects.count() == 0


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"decision": "maybe"}, "decision"),
        ({"content_sha256": "not-a-hash"}, "content_sha256"),
        ({"artifact_version": 0}, "artifact_version"),
        ({"event_id": ""}, "event_id"),
        ({"type": "approval.whatever"}, "type"),
    ],
)
def test_malformed_decision_event_is_422_and_writes_nothing(client, people, override, field):
    body = {
        "type": "approval.decision",
        "approval_id": 1,
        "decision": "approve",
        "artifact_version": 1,
        "content_sha256": "a" * 64,
        "event_id": "e-1",
        **override,
    }
    response = client.post(
        "/api/executions/RUN_0001/events", body, content_type="application/json", **bearer(people["manager"])
    )
    assert response.status_code == 422, response.content
    assert any(field in error["loc"] for error in response.json()["detail"])
    assert Decision.objects.count() == 0


def test_no_or_bad_credentials_is_401(client, people):
    assert client.get("/api/executions").status_code == 401
    assert client.get("/api/executions", HTTP_AUTHORIZATION="Bearer nope").status_code == 401


def test_unknown_execution_is_404_and_bad_filter_is_422(client, people):
    assert client.get("/api/executions/RUN_4242", **bearer(people["requester"])).status_code == 404
    response = client.get("/api/executions?status=sleeping", **bearer(people["requester"]))
    assert response.status_code == 422 and response.json()["detail"][0]["loc"][-1] == "status"


def test_list_is_paginated_newest_first_with_a_cursor(client, people):
    for month in ["2026-01", "2026-02", "2026-03"]:
        Execution.objects.create(
            workflow="monthly_report",
            workflow_version=1,
            input={"month": month},
            input_digest=month,
            created_by=people["requester"].user,
        )
    from executions import selectors

    first, cursor = selectors.execution_page(limit=2)
    assert [e.input["month"] for e in first] == ["2026-03", "2026-02"] and cursor
    response = client.get(f"/api/executions?cursor={cursor}", **bearer(people["requester"]))
    assert [item["input"]["month"] for item in response.json()["items"]] == ["2026-01"]
    assert response.json()["next"] is None


def test_cancel_needs_operator_or_starter(client, people):
    execution = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={"month": "2026-08"},
        input_digest="d",
        created_by=people["requester"].user,
    )
    url = f"/api/executions/{execution.ref}/cancel"
    assert (
        client.post(url, {"reason": "x"}, content_type="application/json", **bearer(people["outsider"])).status_code
        == 403
    )
    ok = client.post(url, {"reason": "not needed"}, content_type="application/json", **bearer(people["operator"]))
    assert ok.status_code == 200 and ok.json()["status"] == "cancelled"
    again = client.post(url, {"reason": "again"}, content_type="application/json", **bearer(people["operator"]))
    assert again.status_code == 409


@pytest.mark.parametrize("ref", ["RUN_²", "RUN_99999999999999999999", "RUN_-1", "abc", "RUN_"])
def test_odd_execution_ids_are_404_not_500(client, people, ref):
    assert client.get(f"/api/executions/{ref}", **bearer(people["requester"])).status_code == 404
    assert client.get(f"/api/executions?cursor={ref}", **bearer(people["requester"])).status_code == 422


def test_listing_a_page_of_executions_costs_a_fixed_number_of_queries(client, people, django_assert_max_num_queries):
    for month in ["2026-01", "2026-02", "2026-03", "2026-04", "2026-05", "2026-06"]:
        Execution.objects.create(
            workflow="monthly_report",
            workflow_version=1,
            input={"month": month},
            input_digest=month,
            created_by=people["requester"].user,
        )
    # The page, its count, pending gates, costs, children, actions, artifacts: one query each, whatever the size.
    with django_assert_max_num_queries(13):  # pending gates: one query a gate kind (approval, wait, children, input)
        response = client.get("/api/executions", **bearer(people["requester"]))
    assert response.status_code == 200 and len(response.json()["items"]) == 6
