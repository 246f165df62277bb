"""Issue 22, items 1–3: approvers told by e-mail exactly once (the embedded default's
files under var/mail/), a reminder once, the operators at the SLA, a short note when a
version is replaced, nothing after a decision; each message a ledger action beside the
steps; signed webhooks through the ledger (5xx retried with the same key, 4xx failed
with the answer). Real processes: the shared stack, with a webhook receiver over HTTP."""

from __future__ import annotations

import email
import json
from pathlib import Path

import pytest
from django.test import Client

from executions.models import Action, Execution, Status
from tests.support.procs import wait_for
from tests.support.receivers import WebhookReceiver
from tests.support.stack import approved, outbox, pk, wait_status

SECRET = "webhook-secret-for-the-tests"


@pytest.fixture(scope="module")
def receiver():
    hooks = WebhookReceiver(SECRET)
    yield hooks
    hooks.close()


@pytest.fixture
def up(stack, receiver):
    receiver.answers.clear()
    stack.up(
        KEEL_NOTIFICATIONS="on",
        EMAIL_HOST="",  # the embedded default's file backend (make run), read below; SMTP is S39's
        KEEL_WEBHOOK_URL=receiver.url,
        KEEL_WEBHOOK_SECRET=SECRET,
        RUNTIME_APPROVAL_REMIND_SECONDS="2",
        APPROVAL_SLA_SECONDS="3",
    )
    return stack


def mails(stack) -> list[email.message.Message]:
    """Every message the file backend wrote under the stack's var/mail/."""
    folder = Path(stack.env["KEEL_VAR_DIR"]) / "mail"
    found = []
    for path in sorted(folder.glob("*.log")) if folder.exists() else []:
        for chunk in path.read_bytes().split(b"\n" + b"-" * 79 + b"\n"):
            if chunk.strip():
                found.append(email.message_from_bytes(chunk))
    return found


def mails_about(stack, ref: str) -> list[email.message.Message]:
    return [m for m in mails(stack) if ref in m["Subject"]]


def text_of(message: email.message.Message) -> tuple[str, str]:
    parts = {
        p.get_content_type(): p.get_payload(decode=True).decode(p.get_content_charset() or "utf-8")
        for p in message.walk()
        if not p.is_multipart()
    }
    return parts["text/plain"], parts["text/html"]


def notify_actions(ref: str) -> dict[str, str]:
    return dict(Action.objects.filter(execution_id=pk(ref), type="notify_approver").values_list("key", "status"))


def test_approvers_told_once_reminded_once_operators_at_the_sla(up, people, api_as, receiver):
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = requester.start()["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    gate = f"approval:{approval['id']}"
    expected = {
        f"{gate}:notify:manager:opened",
        f"{gate}:notify:manager2:opened",
        f"{gate}:notify:manager:reminder",
        f"{gate}:notify:manager2:reminder",
        f"{gate}:notify:manager:approval_overdue",
        f"{gate}:notify:manager2:approval_overdue",
        f"{gate}:notify:operator:approval_overdue",
    }
    wait_for(
        lambda: set(notify_actions(ref)) == expected and set(notify_actions(ref).values()) == {"succeeded"},
        timeout=30,
        what="the opened, reminder and overdue messages",
    )
    got = mails_about(up, ref)
    by = sorted((m["To"], m["Subject"].split(" ")[1]) for m in got)
    assert by == sorted(
        [
            ("manager2@example.com", "Overdue:"),
            ("manager2@example.com", "Reminder:"),
            ("manager2@example.com", ref + ":"),
            ("manager@example.com", "Overdue:"),
            ("manager@example.com", "Reminder:"),
            ("manager@example.com", ref + ":"),
            ("operator@example.com", "Overdue:"),
        ]
    ), by  # never the requester, the auditor or the outsider; each exactly once (issue 39 item 11: managers at the SLA)
    [opened] = [m for m in got if m["To"] == "manager@example.com" and "awaits your decision" in m["Subject"]]
    assert "V1" in opened["Subject"]
    text, html = text_of(opened)
    assert approval["content_sha256"] in text and approval["content_sha256"] in html
    assert f"http://127.0.0.1:8000/approvals/{approval['id']}/" in text and "publish_report" in text
    assert "<script" not in html
    action = Action.objects.get(key=f"{gate}:notify:manager:opened")
    assert action.beside and action.receipt["message_id"] == opened["Message-ID"]
    listed = {a["key"]: a for a in requester.execution(ref)["actions"]}
    assert listed[action.key] == {"key": action.key, "type": "notify_approver", "status": "succeeded", "attempts": 1}
    # The webhook: approval.requested, signed, keyed by the ledger key.
    [requested] = [e for e in receiver.events(ref) if e["event"] == "approval.requested"]
    assert requested["_key"] == f"{gate}:webhook:approval.requested"
    assert (
        requested["execution"]
        == {
            "id": ref,
            "workflow": "monthly_report",
            "status": "awaiting_approval",
            "stuck": requested["execution"]["stuck"],
        }
        and "sent_at" in requested
    )
    # Which request, the exact version to decide, and where: what a chat room's reader needs.
    assert requested["approval"] == {
        "id": approval["id"],
        "artifact_id": approval["artifact_id"],
        "artifact_version": 1,
        "content_sha256": approval["content_sha256"],
        "action": "publish_report",
        "url": f"http://127.0.0.1:8000/approvals/{approval['id']}/",
    }
    assert all(receiver.verified(r) for r in receiver.requests)

    assert manager.decide(ref, approval).status_code == 202
    wait_status(requester, ref, "completed")
    wait_for(lambda: any(e["event"] == "execution.completed" for e in receiver.events(ref)), what="the completed hook")
    up.wait_sweeps(3)
    assert len(mails_about(up, ref)) == 7  # decided: nothing more

    # The auditor's story and the approval page show the e-mails and the webhook sent before
    # the decision under "Who was told", never under "After the decision": it unlocked the
    # publication alone.
    opened_key, hook_key = f"{gate}:notify:manager:opened", f"{gate}:webhook:approval.requested"
    for who, url in (("auditor", f"/approvals/audit/{approval['id']}/"), ("manager", f"/approvals/{approval['id']}/")):
        client = Client()
        client.force_login(people[who].user)
        page = client.get(url).content.decode()
        told, after = card(page, "told"), card(page, "after-decision")
        assert "<h2>Who was told</h2>" in told and "<h2>After the decision</h2>" in after
        assert 'id="effects"' in after and f'data-key="{ref}:publish:v1"' in after, after
        assert f'data-key="{ref}:publish:v1"' not in told and "a later step" not in told, told
        assert not rows_of(after, gate) and not rows_of(after, ":webhook:"), after  # the workflow's own alone
        [mail] = rows_of(told, opened_key)
        assert "manager@example.com" in mail and "notify_approver" in mail and "succeeded" in mail, mail
        assert "awaits your decision" in mail and " UTC</time>" in mail, mail
        [hook] = rows_of(told, hook_key)
        assert "approval.requested" in hook and "succeeded" in hook and "127.0.0.1" in hook, hook
        assert len(rows_of(told, f"{gate}:notify:")) == 7, told  # opened, reminder and overdue: all of them
        assert len(rows_of(told, f"{ref}:webhook:execution.completed:")) == 1, told  # of the execution, after it


def card(page: str, card_id: str) -> str:
    """The section with ``id=card_id`` of a page, up to its end."""
    return page.split(f'<section class="card" id="{card_id}">')[1].split("</section>")[0]


def rows_of(table: str, key_part: str) -> list[str]:
    """The table rows whose ledger key contains ``key_part``."""
    return [row for row in table.split("<tr")[1:] if key_part in row.partition('data-key="')[2].partition('"')[0]]


def test_opt_out_and_a_replaced_version(up, people, api_as):
    requester, manager2 = api_as(people["requester"]), api_as(people["manager2"])
    url = manager2.base + "/account/notifications"
    refused = manager2.session.put(url, json={"email": "not an address"}, timeout=10)
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "email"]
    assert manager2.session.get(url, timeout=10).json() == {
        "email": "manager2@example.com",
        "email_notifications": True,
    }
    off = manager2.session.put(url, json={"email_notifications": False}, timeout=10)
    assert off.status_code == 200 and off.json()["email_notifications"] is False

    ref = requester.start(month="2026-07")["id"]
    v1 = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    wait_for(lambda: len(mails_about(up, ref)) >= 1, what="the opened message")
    assert requester.post(f"/executions/{ref}/redraft", {"instruction": "say more about returns"}).status_code == 200
    v2 = wait_for(
        lambda: (p := requester.execution(ref)["pending_approval"]) and p["artifact_version"] == 2 and p,
        timeout=30,
        what="V2 to await approval",
    )
    replaced = f"approval:{v1['id']}:notify:manager:superseded"
    wait_for(lambda: notify_actions(ref).get(replaced) == "succeeded", what="the replaced note")
    wait_for(
        lambda: notify_actions(ref).get(f"approval:{v2['id']}:notify:manager:opened") == "succeeded",
        what="V2's message",
    )
    got = mails_about(up, ref)
    assert {m["To"] for m in got if "Overdue" not in m["Subject"]} == {"manager@example.com"}  # manager2: off
    [note] = [m for m in got if "replaced" in m["Subject"]]
    assert "V1" in note["Subject"] and "V2" in note["Subject"]
    assert not any("manager2" in key for key in notify_actions(ref))
    assert requester.post(f"/executions/{ref}/cancel", {"reason": "done with the test"}).status_code == 200


def test_webhook_5xx_is_retried_with_the_same_key_and_4xx_fails_with_the_answer(up, people, api_as, receiver):
    requester = api_as(people["requester"])
    receiver.answers[:] = [503]
    ref = requester.start(month="2026-06")["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    key = f"approval:{approval['id']}:webhook:approval.requested"
    wait_for(lambda: Action.objects.filter(key=key, status="succeeded").exists(), timeout=30, what="the retried hook")
    sent = [r for r in receiver.requests if r["key"] == key]
    assert [r["code"] for r in sent] == [503, 200] and Action.objects.get(key=key).attempts == 2

    receiver.answers[:] = [400] * 5
    assert requester.post(f"/executions/{ref}/cancel", {"reason": "to see a hook refused"}).status_code == 200
    other = requester.start(month="2026-05")["id"]
    approval = wait_status(requester, other, "awaiting_approval")["pending_approval"]
    refused = f"approval:{approval['id']}:webhook:approval.requested"
    wait_for(lambda: Action.objects.filter(key=refused, status="failed").exists(), what="the refused hook")
    action = Action.objects.get(key=refused)
    assert action.attempts == 1 and "400" in action.last_error  # not retried
    up.wait_sweeps(3)
    assert Action.objects.get(key=refused).attempts == 1
    assert Execution.objects.get(pk=pk(other)).status == Status.AWAITING_APPROVAL  # never the execution's problem
    assert requester.post(f"/executions/{other}/cancel", {"reason": "done"}).status_code == 200
    json.dumps(receiver.events())  # every delivery is JSON


def test_the_account_page_turns_emails_off_and_the_admin_is_told_where_mail_goes(people, settings):
    from django.test import Client

    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"  # the embedded default's

    client = Client()
    client.force_login(people["manager"].user)
    page = client.get("/account/")
    assert page.status_code == 200 and b'id="email-notifications" checked' in page.content.replace(b"\n", b"")
    assert b"mail-to-files" not in page.content  # not an admin
    bad = client.post("/account/", {"email": "nope", "email_notifications": "on"})
    assert bad.status_code == 422 and b"is not an e-mail address" in bad.content
    assert client.post("/account/", {"email": "manager@example.com"}).status_code == 302
    assert client.get("/api/account/notifications").json() == {
        "email": "manager@example.com",
        "email_notifications": False,
    }
    people["operator"].user.is_staff = True
    people["operator"].user.save()
    client.force_login(people["operator"].user)
    assert b"mail is written to var/mail" in client.get("/account/").content
    page = client.get("/dashboard/metrics/?window=24h")
    assert (
        page.status_code == 200
        and b'id="m-notifications"' in page.content
        and b"0 sent \xc2\xb7 0 failed" in page.content
    )


def test_the_suites_shared_stack_tells_by_smtp_and_signed_webhooks_as_production_does(stack, people, api_as):
    """Production's defaults are the suite's: a shared stack asked for nothing but its
    processes mails the approver through the run's SMTP server and posts signed webhooks
    to the run's receiver (tests/support/stack.py, ``outbox_env``), with no test turning
    either on."""
    stack.up()
    mailbox, hooks = outbox()
    requester = api_as(people["requester"])
    ref = requester.start("2026-08")["id"]
    wait_for(
        lambda: any(ref in m["Subject"] for m in mailbox.to("manager@")),
        timeout=60,
        what="the manager's e-mail, by SMTP",
    )
    approved(api_as, people, ref)
    wait_status(requester, ref, "completed")

    def told_both() -> list[dict]:
        got = hooks.events(ref)
        return got if {e["event"] for e in got} >= {"approval.requested", "execution.completed"} else []

    told = wait_for(told_both, timeout=60, what="the approval.requested and execution.completed webhooks")
    unsigned = [e["event"] for e in told if not hooks.verified(hooks.deliveries[e["_key"]])]
    assert not unsigned, f"webhooks without a valid signature: {unsigned}"
