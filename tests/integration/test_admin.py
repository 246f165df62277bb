"""Django's admin over the runtime's and approvals' models: every page answers for a
superuser, and nothing — status above all — can be changed, added or deleted through
it (API tokens may be deleted: that revokes them)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from accounts.models import ApiToken
from approvals.models import ApprovalRequest, AuditEntry, Decision
from executions.models import Action, Execution, ExecutionEvent, StepRun, Wait
from tests.support.stack import pk, untold, wait_status

MODELS = [Execution, ExecutionEvent, StepRun, Action, Wait, ApiToken, ApprovalRequest, Decision, AuditEntry]


def admin_url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def world(stack, people, api_as) -> dict[str, str]:
    """A completed report (steps, an effect, a decision, audit entries) and an order
    waiting for its shipment signal (a wait), built by a real worker."""
    stack.up()
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    report = requester.start("2026-08")["id"]
    approval = wait_status(requester, report, "awaiting_approval")["pending_approval"]
    assert manager.decide(report, approval).status_code == 202
    order = requester.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1001"}})
    order = order.json()["id"]
    approval = wait_status(requester, order, "awaiting_approval")["pending_approval"]
    assert manager.decide(order, approval).status_code == 202
    wait_status(requester, report, "completed")
    wait_status(requester, order, "waiting")
    return {"report": report, "order": order}


@pytest.fixture
def superuser_client(transactional_db) -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    client.force_login(user)
    return client


def test_every_admin_page_answers_and_nothing_can_be_changed(world, people, superuser_client):
    client = superuser_client
    for model in MODELS:
        obj = model.objects.order_by("pk").first()
        assert obj is not None, f"the world has no {model.__name__}"
        assert client.get(admin_url(model, "changelist")).status_code == 200, model
        assert client.get(admin_url(model, "change", obj.pk)).status_code == 200, model
        assert client.get(admin_url(model, "add")).status_code == 403, model
        deletable = model is ApiToken
        assert client.get(admin_url(model, "delete", obj.pk)).status_code == (200 if deletable else 403), model
    assert client.get(admin_url(Execution, "changelist") + "?q=RUN_0001").status_code == 200
    assert client.get(admin_url(Execution, "changelist") + "?status__exact=waiting").status_code == 200
    token_page = client.get(admin_url(ApiToken, "change", ApiToken.objects.first().pk)).content.decode()
    assert ApiToken.objects.first().digest not in token_page

    # A status edit through the admin's form is refused, and nothing changes.
    report = Execution.objects.get(pk=pk(world["report"]))
    order = Execution.objects.get(pk=pk(world["order"]))
    # What telling people and systems writes meanwhile (the completion's webhook) is not counted.
    events = untold(ExecutionEvent.objects.all()).count()
    for obj, data in [
        (report, {"status": "cancelled", "workflow": "monthly_report", "current_step": "draft"}),
        (order, {"status": "cancelled", "context": "{}"}),
        (Action.objects.filter(execution=report).first(), {"status": "failed", "attempts": 0}),
        (ApprovalRequest.objects.filter(execution=order).first(), {"status": "rejected"}),
        (Wait.objects.filter(execution=order).first(), {"status": "received"}),
    ]:
        before = type(obj).objects.filter(pk=obj.pk).values().get()
        response = client.post(admin_url(type(obj), "change", obj.pk), data)
        assert response.status_code == 403, type(obj)
        assert type(obj).objects.filter(pk=obj.pk).values().get() == before, type(obj)
    assert untold(ExecutionEvent.objects.all()).count() == events
    assert Execution.objects.get(pk=order.pk).status == "waiting"

    # Deleting a token revokes it.
    token = ApiToken.objects.get(user=people["requester"].user)
    assert client.post(admin_url(ApiToken, "delete", token.pk), {"post": "yes"}).status_code == 302
    assert not ApiToken.objects.filter(pk=token.pk).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["requester", "manager", "operator", "auditor"])
def test_the_admin_is_for_staff_only(people, role):
    client = Client()
    client.force_login(people[role].user)
    response = client.get(admin_url(Execution, "changelist"))
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
