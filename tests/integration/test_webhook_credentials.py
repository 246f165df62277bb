"""A Slack- or Teams-style hook URL is its own credential: the ledger stores where a
webhook goes without it (the scheme, the host, ``[redacted: KEEL_WEBHOOK_URL]``), the
POST goes to the URL configured when it is sent, and a webhook planned before
KEEL_WEBHOOK_URL was unset never goes. In process, to a real receiver over HTTP."""

from __future__ import annotations

import pytest

from executions.models import Action
from executions.services import execution_start
from notifications import planning, sending, webhooks
from tests.support.receivers import WebhookReceiver

pytestmark = pytest.mark.django_db(transaction=True)

SECRET_PATH = "services/T01/B02/Xy9zSecretPart"


@pytest.fixture
def hook(settings):
    receiver = WebhookReceiver(settings.KEEL_WEBHOOK_SECRET)
    base = receiver.url.removesuffix("/hooks/keel")
    settings.KEEL_WEBHOOK_URL = f"{base}/{SECRET_PATH}"
    settings.SECRETS = {**settings.SECRETS, "KEEL_WEBHOOK_URL": SECRET_PATH}  # as config/settings.py sets it
    yield receiver, base
    receiver.close()


def planned(execution, key: str) -> Action:
    args = webhooks.describe(execution, event="execution.completed", status="completed")
    assert planning.record_delivery(execution, key, webhooks.WEBHOOK, args, kind="execution.completed") == 1
    return Action.objects.get(key=key)


def test_a_webhooks_credential_path_is_not_stored_and_it_goes_where_the_url_is_now(people, hook, settings):
    receiver, base = hook
    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-01"})
    action = planned(execution, f"{execution.ref}:webhook:test:1")
    assert action.args["url"] == f"{base}/[redacted: KEEL_WEBHOOK_URL]"
    assert SECRET_PATH not in str(action.args)

    assert sending.deliver(action.key) == Action.State.SUCCEEDED
    [sent] = [r for r in receiver.requests if r["key"] == action.key]
    assert sent["path"] == f"/{SECRET_PATH}" and receiver.verified(sent)
    action.refresh_from_db()
    assert SECRET_PATH not in str(action.receipt) and "[redacted: KEEL_WEBHOOK_URL]" in action.receipt["url"]

    later = planned(execution, f"{execution.ref}:webhook:test:2")
    retrying = planned(execution, f"{execution.ref}:webhook:test:3")
    receiver.answers[:] = [503]
    assert sending.deliver(retrying.key) == Action.State.FAILED  # due again, with the same key
    lost = planned(execution, f"{execution.ref}:webhook:test:4")
    receiver.answers[:] = [(503, {}, b"")]
    sending.deliver(lost.key)
    Action.objects.filter(pk=lost.pk).update(status=Action.State.UNKNOWN)  # as a lost answer leaves it

    settings.KEEL_WEBHOOK_URL = ""  # webhooks turned off before they went (again)
    for action, attempts in ((later, 0), (retrying, 1), (lost, 2)):
        assert sending.deliver(action.key) == Action.State.FAILED, action.key
        action.refresh_from_db()
        assert action.last_error.endswith(webhooks.OFF) and action.attempts == attempts, (action.key, action.last_error)
    assert len([r for r in receiver.requests if r["key"] in (later.key, retrying.key, lost.key)]) == 2
