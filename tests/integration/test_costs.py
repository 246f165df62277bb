"""Costs and budgets in one process (executions.engine.costs): prices by model requested
then returned, a child's calls charged against its parent's budget through
``Execution.parent``, reservations replaced rather than added, the CLI's --budget-usd."""

from __future__ import annotations

import io
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.test import Client

from executions import selectors, services
from executions.engine import costs, runner
from executions.engine.leases import acquire
from executions.errors import InvalidInput
from executions.models import CostReservation, Execution, ModelCall, Status

OFFLINE = "offline-deterministic-1"


@pytest.fixture
def priced(settings):
    settings.RUNTIME_MODEL_PRICES = {OFFLINE: {"input_per_mtok": 10, "output_per_mtok": 30}}


def start(people, month: str = "2026-08", **extra) -> Execution:
    execution, _ = services.execution_start(
        user=people["requester"].user, workflow="monthly_report", input={"month": month}, **extra
    )
    return execution


def test_prices_by_model_requested_then_returned(settings):
    settings.RUNTIME_MODEL_PRICES = {
        "a": {"input_per_mtok": 1, "output_per_mtok": 2},
        "b-2": {"input_per_mtok": 3, "output_per_mtok": 0},
    }
    assert costs.cost_usd(model="a", returned="b-2", input_tokens=1_000_000, output_tokens=500_000) == Decimal("2")
    assert costs.cost_usd(model="x", returned="b-2", input_tokens=1000, output_tokens=10) == Decimal("0.003")
    assert costs.cost_usd(model="x", returned="y", input_tokens=1000, output_tokens=10) is None
    assert costs.worst_case(model="x", canonical={}, max_tokens=10) is None
    # One token per two UTF-8 bytes of the canonical JSON ({"m":"x…"}: 404 bytes), plus max_tokens out.
    assert costs.worst_case(model="a", canonical={"m": "x" * 396}, max_tokens=1000) == Decimal("0.002202")


def test_the_worst_case_never_counts_fewer_tokens_than_a_provider_in_any_script():
    """CJK, Cyrillic, emoji-free Latin: at least one token per two UTF-8 bytes, so a tokenizer
    (about one token per CJK character, one per four English characters) never counts more."""
    for text, tokenizer_floor in [("库存不足，请退款。" * 50, 9 * 50), ("Пожалуйста, верните деньги. " * 40, 0)]:
        canonical = {"messages": [{"role": "user", "content": text}]}
        assert costs.request_tokens(canonical) >= len(text.encode()) // 2 >= tokenizer_floor
    english = {"messages": [{"role": "user", "content": "please refund the broken mug " * 40}]}
    assert costs.request_tokens(english) >= len("please refund the broken mug " * 40) // 4


def test_a_budget_without_a_price_for_the_model_is_refused_naming_it(people, settings):
    settings.RUNTIME_MODEL_PRICES = {}
    with pytest.raises(InvalidInput) as refused:
        start(people, budget_usd=5)
    assert refused.value.field == "budget_usd" and OFFLINE in str(refused.value)
    assert not Execution.objects.exists()
    settings.RUNTIME_MODEL_PRICES = {OFFLINE: {"input_per_mtok": 1, "output_per_mtok": 1}}
    assert start(people, budget_usd=5).budget_usd == Decimal(5)
    with pytest.raises(InvalidInput) as refused:  # priced, but this workflow asks no model at all
        services.execution_start(
            user=people["requester"].user,
            workflow="replacement_order",
            input={"original_order": "ORD-1001"},
            budget_usd=5,
        )
    assert refused.value.field == "budget_usd" and "replacement_order asks no model" in str(refused.value)


def test_usd_amounts_are_refused_naming_the_field():
    for bad in (0, -1, "3", True, float("nan"), float("inf"), 1e6 + 0.5, 0.0000001):
        with pytest.raises(InvalidInput) as refused:
            services.usd_amount("budget_usd", bad)
        assert refused.value.field == "budget_usd"
    assert services.usd_amount("add_usd", 1e6) == Decimal(1_000_000)
    assert services.usd_amount("add_usd", 0.1) == Decimal("0.1")


def test_a_budget_too_small_for_the_first_call_stops_before_it(people, priced):
    execution = start(people, budget_usd=0.000001)
    assert runner.advance(execution.pk, worker="worker:test") == "stopped"
    execution.refresh_from_db()
    assert (execution.status, execution.reason_code) == (Status.NEEDS_ATTENTION, "budget_exceeded")
    assert not ModelCall.objects.filter(execution=execution).exists()
    assert f"{execution.ref}:analyze:r1:c1" in execution.status_reason


def test_a_childs_calls_count_against_its_parents_budget(people, priced):
    """Through Execution.parent (issue 21a starts children; here the rows are linked by hand)."""
    parent = start(people, "2026-07", budget_usd=0.01)
    child = start(people, "2026-08")
    Execution.objects.filter(pk=child.pk).update(parent=parent, parent_step="months", child_key="2026-08")
    assert runner.advance(child.pk, worker="worker:test") == "stopped"
    child.refresh_from_db()
    assert (child.status, child.reason_code) == (Status.NEEDS_ATTENTION, "budget_exceeded")
    assert parent.ref in child.status_reason  # the budget that stopped it is its parent's

    Execution.objects.filter(pk=parent.pk).update(budget_usd=Decimal(1))
    services.execution_resume(ref=child.ref, user=people["operator"].user, reason="the parent's budget was raised")
    assert runner.advance(child.pk, worker="worker:test") == "stopped"
    child.refresh_from_db()
    assert child.status == Status.AWAITING_APPROVAL
    [call] = ModelCall.objects.filter(execution=child)
    assert call.cost is not None and call.cost > 0
    assert call.cost == costs.cost_usd(
        model=OFFLINE, returned=OFFLINE, input_tokens=call.input_tokens, output_tokens=call.output_tokens
    )
    parent.refresh_from_db()
    shown = selectors.cost_payload(parent)  # the parent's cost includes its child's
    assert shown == {
        "usd": float(call.cost),
        "input_tokens": call.input_tokens,
        "output_tokens": call.output_tokens,
        "budget_usd": 1.0,
    }
    page = Client()
    page.force_login(people["requester"].user)
    [listed] = [i for i in page.get("/api/executions").json()["items"] if i["id"] == parent.ref]
    assert listed["cost"] == shown  # the list's batched cost says the same


def test_a_reservation_is_replaced_not_added_and_settled_by_the_journal(people, priced):
    parent = start(people, "2026-07", budget_usd=0.05)
    child = start(people, "2026-08")
    Execution.objects.filter(pk=child.pk).update(parent=parent, parent_step="months", child_key="2026-08")
    child.refresh_from_db()
    lease = acquire(child.pk, owner="worker:test")
    costs.reserve(lease, execution=child, key="k1", revision=1, amount=Decimal("0.03"))
    costs.reserve(lease, execution=child, key="k1", revision=1, amount=Decimal("0.03"))  # the same call again
    assert CostReservation.objects.filter(key="k1").count() == 1
    with pytest.raises(costs.BudgetExceeded) as refused:
        costs.reserve(lease, execution=child, key="k2", revision=1, amount=Decimal("0.03"))
    assert refused.value.evidence["reserved_usd"] == "0.030000"
    assert not CostReservation.objects.filter(key="k2").exists()
    # Settled: once the journal has k1 (at its real cost), its reservation no longer counts.
    ModelCall.objects.create(
        key="k1",
        execution=child,
        step="analyze",
        round=1,
        seq=1,
        provider="offline",
        adapter="a",
        model=OFFLINE,
        request_sha256="0" * 64,
        request={},
        response={},
        cost=Decimal("0.001"),
        lease_token=lease.token,
    )
    costs.reserve(lease, execution=child, key="k2", revision=1, amount=Decimal("0.03"))
    spend = costs.spend_of(costs.tree_ids(parent.pk))
    assert (spend.spent_usd, spend.reserved_usd) == (Decimal("0.001"), Decimal("0.03"))


def test_the_cli_starts_with_a_budget(people, priced):
    out = io.StringIO()
    call_command(
        "keel", "start", "monthly_report", "--input", '{"month": "2026-08"}', "--budget-usd", "2.5",
        "--as", "requester", "--json", stdout=out,
    )  # fmt: skip
    assert '"budget_usd": 2.5' in out.getvalue()


def test_cost_on_the_execution_page_the_metrics_page_the_api_and_prometheus(people, priced, settings):
    execution = start(people, budget_usd=3)
    assert runner.advance(execution.pk, worker="worker:test") == "stopped"
    [call] = ModelCall.objects.filter(execution=execution)
    operator = Client()
    operator.force_login(people["operator"].user)
    page = operator.get(f"/executions/{execution.ref}/").content.decode()
    assert f"${call.cost}" in page and 'id="cost"' in page and "budget $3.000000" in page
    metrics = operator.get("/dashboard/metrics/?window=24h").content.decode()
    assert 'id="model-cost"' in metrics and OFFLINE in metrics and f"{call.cost}" in metrics
    body = operator.get("/api/metrics?window=24h").json()
    assert body["cost_usd"] == {"monthly_report": {OFFLINE: float(call.cost)}}
    assert operator.get("/api/metrics?window=24h&workflow=support_agent").json()["cost_usd"] == {}
    settings.RUNTIME_METRICS_TOKEN = "scrape-me"
    scraped = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-me").content.decode()
    assert f'keel_model_cost_usd_total{{model="{OFFLINE}",workflow="monthly_report"}} {float(call.cost)}' in scraped


def test_the_resume_preview_follows_the_recorded_route(people):
    """Explicit edges: the preview lists the steps the route led to, not every branch."""
    from triage.preview import resume_preview

    execution = Execution.objects.create(
        workflow="support_agent",
        workflow_version=2,
        input={"ticket": "TCK-1005"},
        input_digest="x",
        created_by=people["requester"].user,
        current_step="answer",
        context={"state": {"route": {"route": "answer", "why": ""}}, "notes": {}},
    )
    steps = resume_preview(execution)["steps"]
    assert [(s["step"], s["plan"]) for s in steps] == [("route", "skip"), ("answer", "run")]
    Execution.objects.filter(pk=execution.pk).update(current_step="route", context={"notes": {}})
    execution.refresh_from_db()
    assert [s["step"] for s in resume_preview(execution)["steps"]] == ["route"]  # the model hasn't chosen yet
