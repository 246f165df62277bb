"""Issue 38 (item 9.5): the dashboard's start form (docs/design.md §6, "Platform") reads an integer
field as ASCII digits with an optional sign, nothing else. Python's ``int()`` also takes
``1_0`` (ten) and other scripts' digits (``٣``, Arabic-Indic three), and ``float()`` takes
``nan`` and ``inf``: each was started as a number nobody typed. Now each is refused with
the reason beside the field (422) and nothing starts; the cost budget field likewise."""

from __future__ import annotations

import pytest
from django.test import Client

from executions.models import Execution

FORM = "/executions/start/replacement_order/"  # confirm_within_seconds: an integer ≥ 1


@pytest.fixture
def requester(people) -> Client:
    client = Client()
    client.force_login(people["requester"].user)
    return client


@pytest.mark.parametrize("typed", ["1_0", "٣", "٣٠", "１０", "10.0", "1e3", "0x10", "+-5", "6 0", "²"])
def test_an_integer_that_is_not_plain_ascii_digits_is_refused_beside_the_field(requester, typed):
    answer = requester.post(FORM, {"original_order": "ORD-1001", "confirm_within_seconds": typed})
    assert answer.status_code == 422
    html = answer.content.decode()
    assert 'id="field-confirm_within_seconds-error"' in html and "the digits 0-9" in html
    assert not Execution.objects.exists()


@pytest.mark.parametrize("typed, read", [("60", 60), ("+60", 60), ("0060", 60)])
def test_plain_digits_with_an_optional_sign_start_it(requester, typed, read):
    answer = requester.post(FORM, {"original_order": "ORD-1001", "confirm_within_seconds": typed})
    assert answer.status_code == 303, answer.content.decode()[-2000:]
    assert Execution.objects.get().input["confirm_within_seconds"] == read


def test_a_negative_integer_is_read_and_then_refused_by_the_schema_beside_the_field(requester):
    answer = requester.post(FORM, {"original_order": "ORD-1001", "confirm_within_seconds": "-5"})
    assert answer.status_code == 422 and 'id="field-confirm_within_seconds-error"' in answer.content.decode()


@pytest.mark.parametrize("typed", ["1_0", "٣", "nan", "inf", "1e999"])
def test_a_budget_that_is_not_plain_digits_is_refused_beside_it(requester, typed):
    answer = requester.post("/executions/start/support_agent/", {"ticket": "TCK-1001", "_budget_usd": typed})
    assert answer.status_code == 422
    assert "the digits 0-9" in answer.content.decode()
    assert not Execution.objects.exists()
