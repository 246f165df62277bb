"""Issue 39, the peers' paragraph: Temporal lets an operator find an execution by what it
was started with; keel's list could filter only by status, workflow, reason, parent and
hold. Now ``GET /api/executions?input=KEY:VALUE`` (JSON containment on the input, a value
read as a number or boolean when it is one), combinable with the other filters, a bad
value a 422 naming ``input``; on PostgreSQL a GIN index (``jsonb_path_ops``) serves it;
the list page has a search box for it and ``keel list --input KEY:VALUE`` the same."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client

from executions import selectors
from executions.errors import InvalidInput
from executions.models import Execution, Status


@pytest.fixture
def runs(people) -> dict[str, Execution]:
    def make(name: str, workflow: str, data: dict, status: str = Status.PENDING) -> Execution:
        execution = Execution.objects.create(
            workflow=workflow, workflow_version=1, input=data, input_digest=name, created_by=people["requester"].user
        )
        Execution.objects.filter(pk=execution.pk).update(status=status)
        return execution

    return {
        "june": make("june", "monthly_report", {"month": "2026-06"}),
        "june_done": make("june_done", "monthly_report", {"month": "2026-06"}, Status.COMPLETED),
        "july": make("july", "monthly_report", {"month": "2026-07", "constraints": ["short"]}),
        "order": make("order", "replacement_order", {"original_order": "ORD-1001", "confirm_within_seconds": 60}),
        "order_text": make(
            "order_text", "replacement_order", {"original_order": "ORD-1002", "confirm_within_seconds": "60"}
        ),
    }


def _refs(answer) -> set[str]:
    assert answer.status_code == 200, answer.content
    return {item["id"] for item in answer.json()["items"]}


def test_the_api_finds_executions_by_a_field_of_their_input(people, runs):
    """Issue 39 peers: ``input=month:2026-06`` lists the June reports, and with ``status`` only the live one."""
    api = Client(HTTP_AUTHORIZATION=f"Bearer {people['requester'].token}")
    assert _refs(api.get("/api/executions", {"input": "month:2026-06"})) == {runs["june"].ref, runs["june_done"].ref}
    both = api.get("/api/executions", {"input": "month:2026-06", "status": "completed"})
    assert _refs(both) == {runs["june_done"].ref}
    assert _refs(api.get("/api/executions", {"input": "month:2026-06", "workflow": "replacement_order"})) == set()


def test_a_value_that_reads_as_a_number_matches_the_number_and_a_quoted_one_the_string(people, runs):
    """Issue 39 peers: ``60`` is the integer 60, ``"60"`` the string."""
    api = Client(HTTP_AUTHORIZATION=f"Bearer {people['requester'].token}")
    assert _refs(api.get("/api/executions", {"input": "confirm_within_seconds:60"})) == {runs["order"].ref}
    assert _refs(api.get("/api/executions", {"input": 'confirm_within_seconds:"60"'})) == {runs["order_text"].ref}
    assert _refs(api.get("/api/executions", {"input": "original_order:ORD-1002"})) == {runs["order_text"].ref}


@pytest.mark.parametrize("bad", ["month", ":2026-06", "month:", "mo nth:x", "a" * 101 + ":x", "month:\x00"])
def test_a_bad_input_filter_is_422_naming_input(people, runs, bad):
    """Issue 39 peers: no colon, no key, no value, a key with a space, too long, a NUL."""
    api = Client(HTTP_AUTHORIZATION=f"Bearer {people['requester'].token}")
    answer = api.get("/api/executions", {"input": bad})
    assert answer.status_code == 422, answer.content
    assert "input" in answer.json()["detail"][0]["loc"]


def test_input_match_reads_key_and_value():
    """Issue 39 peers: the filter's parse, pure."""
    assert selectors.input_match("month:2026-06") == {"month": "2026-06"}
    assert selectors.input_match("at:12:30") == {"at": "12:30"}
    assert selectors.input_match("n:2.5") == {"n": 2.5}
    assert selectors.input_match("urgent:true") == {"urgent": True}
    assert selectors.input_match("x:null") == {"x": "null"}
    assert selectors.input_match("x:NaN") == {"x": "NaN"}
    with pytest.raises(InvalidInput) as refused:
        selectors.input_match("month=2026-06")
    assert refused.value.field == "input"


def test_a_gin_index_serves_the_search_on_postgresql(people, runs):
    """Issue 39 peers: the containment query can be answered from ``execution_input_path``."""
    if connection.vendor != "postgresql":
        pytest.skip("the GIN index is PostgreSQL's")
    query = selectors.filtered(input="month:2026-06").values("pk")
    sql, params = query.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "execution_input_path" in plan, plan


def test_the_list_page_has_a_search_box_and_says_why_a_bad_one_is_refused(people, runs):
    """Issue 39 peers: the page's search box filters the rows; a bad value is a message, not a 500."""
    page = Client()
    page.force_login(people["requester"].user)
    html = page.get("/", {"input": "month:2026-07"}).content.decode()
    assert 'id="input-filter"' in html and 'value="month:2026-07"' in html
    assert runs["july"].ref in html and runs["june"].ref not in html
    refused = page.get("/", {"input": "no colon here"})
    assert refused.status_code == 200 and "KEY:VALUE" in refused.content.decode()


def test_keel_list_input(people, runs):
    """Issue 39 peers: ``keel list --input KEY:VALUE``."""
    out = io.StringIO()
    call_command("keel", "list", "--input", "month:2026-06", "--status", "pending", "--json", stdout=out)
    assert [item["id"] for item in json.loads(out.getvalue())["items"]] == [runs["june"].ref]
