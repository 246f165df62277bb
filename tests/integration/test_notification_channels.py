"""A notification channel is one registration (issue 41): a channel registered from outside
``notifications`` — here a chat webhook of the test's own — has its deliveries recorded
as beside actions in the ledger and sent once by the sender, as e-mail and webhooks are."""

from __future__ import annotations

import pytest
from django.db import transaction

from executions.models import Action, Execution
from notifications import channels, mail, planning, sending, webhooks


@pytest.fixture
def chat():
    sent: list[tuple[str, dict]] = []

    def send(args: dict, key: str) -> dict:
        sent.append((key, args))
        return {"posted": len(sent)}

    channel = channels.register(channels.Channel(name="chat", action_type="chat_message", honors_key=True, send=send))
    yield channel, sent
    channels._channels.pop(channel.name)


def test_the_shipped_channels_are_registered():
    assert {c.name for c in channels.registered()} >= {"email", "webhook"}
    assert channels.get("email") is mail.EMAIL and not mail.EMAIL.honors_key
    assert channels.get("webhook") is webhooks.WEBHOOK and webhooks.WEBHOOK.honors_key
    with pytest.raises(LookupError, match="no notification channel 'pager'"):
        channels.get("pager")
    with pytest.raises(ValueError, match="registered twice"):
        channels.register(mail.EMAIL)


def test_a_new_channel_is_one_registration_and_sends_each_delivery_once(people, chat):
    channel, sent = chat
    execution = Execution.objects.create(
        workflow="monthly_report", workflow_version=1, input={}, input_digest="d", created_by=people["requester"].user
    )
    key = f"{execution.ref}:chat:opened"
    with transaction.atomic():
        assert planning.record_delivery(execution, key, channel, {"text": "a report awaits you"}, kind="opened") == 1
        assert planning.record_delivery(execution, key, channel, {"text": "again"}, kind="opened") == 0  # once a key

    assert sending.deliver(key) == Action.State.SUCCEEDED
    assert sending.deliver(key) == Action.State.SUCCEEDED  # settled: nothing sent again
    assert sent == [(key, {"text": "a report awaits you"})]
    action = Action.objects.get(key=key)
    assert (action.type, action.beside, action.honors_key, action.receipt) == (
        "chat_message",
        True,
        True,
        {"posted": 1},
    )
    assert action.delivery.channel == "chat" and action.delivery.due_at is None
