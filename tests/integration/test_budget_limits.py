"""Issue 38 (item 9.3): a budget's numbers at the API's edge. A raise that would take
``budget_usd`` past what its column holds (16 digits, 6 after the point) was a 500 from
PostgreSQL's numeric overflow; it is a 422 naming ``add_usd`` and nothing changes. A
budget or a raise over 1e6, or not a JSON number, stays a 422 naming its field, at the
start as at the raise."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from executions import services
from executions.models import Execution, ExecutionEvent

OFFLINE = "offline-deterministic-1"
COLUMN_MAX = Decimal("9999999999.999999")  # Execution.budget_usd: 16 digits, 6 after the point


@pytest.fixture
def priced(settings):
    settings.RUNTIME_MODEL_PRICES = {OFFLINE: {"input_per_mtok": 10, "output_per_mtok": 30}}


def client(person) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {person.token}")


def refused_field(response) -> list:
    assert response.status_code == 422, (response.status_code, response.content)
    return response.json()["detail"][0]["loc"]


def test_a_raise_past_the_column_is_a_422_naming_add_usd_and_changes_nothing(people, priced):
    execution, _ = services.execution_start(
        user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"}, budget_usd=5
    )
    near = COLUMN_MAX - Decimal("0.5")
    Execution.objects.filter(pk=execution.pk).update(budget_usd=near)  # raised many times before
    operator = Client(HTTP_AUTHORIZATION=f"Bearer {people['operator'].token}", raise_request_exception=False)
    url = f"/api/executions/{execution.ref}/budget"

    answer = operator.post(url, {"add_usd": 1, "reason": "more"}, content_type="application/json")
    assert refused_field(answer) == ["body", "add_usd"]
    assert "9999999999.999999" in answer.json()["detail"][0]["msg"]
    execution.refresh_from_db()
    assert execution.budget_usd == near
    assert not ExecutionEvent.objects.filter(execution=execution, type="operator.raise_budget").exists()

    # Up to the very top is still a raise.
    fits = operator.post(url, {"add_usd": 0.5, "reason": "to the top"}, content_type="application/json")
    assert fits.status_code == 200, fits.content
    execution.refresh_from_db()
    assert execution.budget_usd == COLUMN_MAX == services.MAX_BUDGET_USD

    for bad in (1e6 + 1, "1", None, True, -1, 0):
        again = operator.post(url, {"add_usd": bad, "reason": "more"}, content_type="application/json")
        assert refused_field(again) == ["body", "add_usd"], bad


def test_a_start_budget_over_a_million_or_not_a_number_is_a_422_naming_budget_usd(people, priced):
    requester = client(people["requester"])
    for bad in (1e6 + 1, 1e300, "5", True, [5], {"usd": 5}):
        answer = requester.post(
            "/api/executions",
            {"workflow": "monthly_report", "input": {"month": "2026-08"}, "budget_usd": bad},
            content_type="application/json",
        )
        assert refused_field(answer) == ["body", "budget_usd"], bad
    # JSON's own overflow: a number too large for a float is still a number the edge refuses by name.
    huge = requester.post(
        "/api/executions",
        b'{"workflow": "monthly_report", "input": {"month": "2026-08"}, "budget_usd": 1e999}',
        content_type="application/json",
    )
    assert huge.status_code == 422, huge.content
    assert not Execution.objects.exists()
