"""Issue 39, item 15: the start form showed one error at a time. A validator's own refusal
(an unknown order) stopped the input's check at that field, and a bad cost budget stopped
it before it began: a person fixed one field, submitted, and met the next. Now every
refused field says why at once, each beside its field (422, nothing started); the API's
422 lists every refused input field in ``detail`` (the same ``loc``/``msg`` shape)."""

from __future__ import annotations

import pytest
from django.test import Client

from executions.models import Execution


@pytest.fixture
def requester(people) -> Client:
    client = Client()
    client.force_login(people["requester"].user)
    return client


def _error(html: str, field_id: str) -> bool:
    return f'id="{field_id}-error"' in html


def test_an_unknown_order_and_a_bad_wait_are_both_shown_beside_their_fields(requester):
    """Issue 39 item 15: both the validator's refusal and the schema's, in one answer."""
    answer = requester.post(
        "/executions/start/replacement_order/", {"original_order": "ORD-9999", "confirm_within_seconds": "-5"}
    )
    assert answer.status_code == 422
    html = answer.content.decode()
    assert _error(html, "field-original_order") and "ORD-9999" in html
    assert _error(html, "field-confirm_within_seconds")
    assert not Execution.objects.exists()


def test_a_bad_budget_still_checks_the_input(requester):
    """Issue 39 item 15: a budget that isn't a number no longer hides the unknown ticket."""
    answer = requester.post("/executions/start/support_agent/", {"ticket": "TCK-9999", "_budget_usd": "lots"})
    assert answer.status_code == 422
    html = answer.content.decode()
    assert 'id="start-budget-error"' in html and "the digits 0-9" in html
    assert _error(html, "field-ticket") and "unknown ticket" in html
    assert not Execution.objects.exists()


def test_a_budget_the_api_refuses_still_checks_the_input(requester):
    """Issue 39 item 15: a budget past the limit (refused by the API's own schema) and the
    unknown ticket, together."""
    answer = requester.post("/executions/start/support_agent/", {"ticket": "TCK-9999", "_budget_usd": "2000000"})
    assert answer.status_code == 422
    html = answer.content.decode()
    assert 'id="start-budget-error"' in html
    assert _error(html, "field-ticket") and "unknown ticket" in html


def test_the_api_lists_every_refused_input_field(people):
    """Issue 39 item 15: the API's 422 ``detail`` names every refused field, not the first."""
    client = Client()
    answer = client.post(
        "/api/executions",
        {"workflow": "replacement_order", "input": {"original_order": "ORD-9999", "confirm_within_seconds": 0}},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {people['requester'].token}",
    )
    assert answer.status_code == 422
    locs = [error["loc"] for error in answer.json()["detail"]]
    assert ["body", "input", "original_order"] in locs
    assert ["body", "input", "confirm_within_seconds"] in locs
    assert all(error["msg"] for error in answer.json()["detail"])
