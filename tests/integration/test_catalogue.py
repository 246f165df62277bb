"""The catalogue and the start forms (issue 20, docs/design.md §6 "Platform"): ``GET /api/workflows``
and ``/api/workflows/{name}`` to the letter, the workflows page, and a start form drawn from
each workflow's input schema — a hidden idempotency key (the same form twice starts one
execution), 303 to the execution's page, 422 with the reason beside the field."""

from __future__ import annotations

import re
from typing import Literal

import pytest
from django.test import Client
from pydantic import Field

from executions.authoring import Workflow, WorkflowInput, registry
from executions.models import Execution

ITEM_KEYS = {
    "name",
    "title",
    "description",
    "version",
    "versions",
    "input_schema",
    "steps",
    "by_version",
    "unregistered_live",
    "rollout",
    "paused",
    "paused_reason",
    "paused_by",
    "paused_at",
}


def logged_in(person) -> Client:
    client = Client()
    client.force_login(person.user)
    return client


def test_the_catalogue_lists_every_workflow_with_its_schema_and_steps(people):
    client = Client(headers={"authorization": f"Bearer {people['requester'].token}"})
    answer = client.get("/api/workflows")
    assert answer.status_code == 200, answer.content
    items = answer.json()["items"]
    assert [i["name"] for i in items] == sorted(registry.names())
    assert all(set(i) == ITEM_KEYS for i in items)
    monthly = next(i for i in items if i["name"] == "monthly_report")
    assert monthly["version"] == 1 and monthly["versions"] == [1] and monthly["paused"] is False
    assert monthly["input_schema"]["required"] == ["month"]
    assert monthly["input_schema"]["properties"]["month"]["examples"] == ["2026-08"]
    assert [s["name"] for s in monthly["steps"]][:2] == ["retrieve_figures", "analyze"]
    assert monthly["steps"][1] == {"name": "analyze", "label": "Analyzing performance", "kind": "model"}

    one = client.get("/api/workflows/replacement_order").json()
    assert one["version"] == 2 and one["versions"] == [1, 2]
    assert one["input_schema"]["properties"]["confirm_within_seconds"]["type"] == "integer"
    missing = client.get("/api/workflows/no_such_flow")
    assert missing.status_code == 404 and "no_such_flow" in missing.json()["detail"]
    assert Client().get("/api/workflows").status_code == 401


def test_a_start_form_is_drawn_from_the_schema_and_a_double_submit_starts_one(people):
    client = logged_in(people["requester"])
    page = client.get("/executions/start/replacement_order/")
    assert page.status_code == 200
    html = page.content.decode()
    key = re.search(r'name="idempotency_key" value="([0-9a-f]{32})"', html).group(1)
    assert '<label for="field-original_order">' in html and 'placeholder="ORD-1001"' in html
    assert 'id="field-confirm_within_seconds"' in html and 'type="number"' in html and 'min="1"' in html
    assert '<textarea id="field-constraints"' in html  # the list editor
    assert "a past order of the catalogue" in html  # the description as help text

    form = {"idempotency_key": key, "original_order": "ORD-1001", "confirm_within_seconds": "60"}
    first = client.post("/executions/start/replacement_order/", form)
    assert first.status_code == 303
    second = client.post("/executions/start/replacement_order/", form)  # a double click, a reload
    assert second.status_code == 303 and second["Location"] == first["Location"]
    [execution] = Execution.objects.all()
    assert execution.input["confirm_within_seconds"] == 60 and first["Location"] == f"/executions/{execution.ref}/"
    assert client.get("/executions/start/replacement_order/").content.decode().count(key) == 0  # a new key


def test_a_bad_field_shows_the_form_again_with_the_reason_beside_it(people):
    client = logged_in(people["requester"])
    bad = client.post("/executions/start/monthly_report/", {"idempotency_key": "k-bad", "month": "2030-01"})
    assert bad.status_code == 422
    html = bad.content.decode()
    assert 'id="field-month-error"' in html and "2030-01" in html and "retail_snapshot_v1" in html
    not_a_number = client.post(
        "/executions/start/replacement_order/", {"original_order": "ORD-1001", "confirm_within_seconds": "soon"}
    )
    assert (
        not_a_number.status_code == 422 and 'id="field-confirm_within_seconds-error"' in not_a_number.content.decode()
    )
    assert client.post("/executions/start/monthly_report/", {"month": ""}).status_code == 422
    assert client.get("/executions/start/no_such_flow/").status_code == 404
    assert not Execution.objects.exists()


def test_the_list_links_a_start_form_for_every_workflow_and_the_workflows_page_shows_them(people):
    client = logged_in(people["requester"])
    home = client.get("/").content.decode()
    for name in registry.names():
        assert f'href="/executions/start/{name}/"' in home
    page = client.get("/workflows/").content.decode()
    for name in registry.names():
        assert f'id="workflow-{name}"' in page
    assert "Live executions" in page and "retrieve_figures" in page


def test_the_start_form_takes_an_optional_cost_budget_and_refuses_a_bad_one_beside_it(people, settings):
    settings.RUNTIME_MODEL_PRICES = {"offline-deterministic-1": {"input_per_mtok": 1, "output_per_mtok": 2}}
    client = logged_in(people["requester"])
    assert 'id="start-budget"' in client.get("/executions/start/support_agent/").content.decode()
    for bad in ("0", "-1", "2000000", "lots"):
        refused = client.post("/executions/start/support_agent/", {"ticket": "TCK-1001", "_budget_usd": bad})
        assert refused.status_code == 422 and 'id="start-budget-error"' in refused.content.decode(), bad
    assert not Execution.objects.exists()
    started = client.post(
        "/executions/start/support_agent/", {"idempotency_key": "k-budget", "ticket": "TCK-1001", "_budget_usd": "2.5"}
    )
    assert started.status_code == 303
    [execution] = Execution.objects.all()
    assert float(execution.budget_usd) == 2.5


class _VendorInput(WorkflowInput):
    country: Literal["US", "DE", "JP"] = Field(description="where it is registered")
    documents: list[str] = Field(default_factory=list, max_length=10, description="what it sent")


@pytest.fixture
def vendor_form():
    """A workflow with a required choice and a bounded list, registered for one test."""
    saved = dict(registry._workflows)
    flow = registry.register(Workflow(name="vendor_form", version=1, title="Vendor", input=_VendorInput))
    flow.step("only", label="Only")(lambda ctx: {})
    yield "/executions/start/vendor_form/"
    registry._workflows.clear()
    registry._workflows.update(saved)


def test_a_required_choice_starts_unchosen_and_a_lists_limits_are_said_once(people, vendor_form):
    """Found starting a ported workflow from the dashboard: a required choice showed its
    first option already chosen (submitting without a look started it "US"), and a list's
    help said its limits twice ("at most 10 — at most 10; one a line")."""
    client = logged_in(people["requester"])
    html = client.get(vendor_form).content.decode()
    select = html[html.index('<select id="field-country"') : html.index("</select>")]
    assert '<option value="" disabled selected>— choose —</option>' in select
    assert 'value="US" selected' not in select
    help_text = re.search(r'id="field-documents-help">([^<]*)<', html).group(1)
    assert help_text == "what it sent — one a line, at most 10", help_text
    refused = client.post(vendor_form, {"documents": "w9"})  # no country chosen
    assert refused.status_code == 422 and 'id="field-country-error"' in refused.content.decode()
    kept = refused.content.decode()
    assert '<option value="" disabled selected>' in kept and not Execution.objects.exists()
    chosen = client.post(vendor_form, {"country": "DE", "documents": "w9"})
    assert chosen.status_code == 303 and Execution.objects.get().input["country"] == "DE"
