"""A provider echoing the API key *encoded* (issue 38, item 9.1), on real processes.

The sandbox's ``echo_secret`` fault makes a service quote a key in every encoding a
security probe saw (sandbox/echo.py: base64 in both alphabets and three alignments,
percent-encoding full and partial, hex, reversed, halves): the model provider echoes
the ``Authorization`` key it was sent — in a 500 and then in every answer's text —, the
order service echoes it in its receipt, the notification service in a 403, the webhook
receiver echoes the webhook secret in its answers. Nothing of either key reaches the
events, the model-call journal, the ledger's receipts, any other table, the execution
page, the API, the webhook bodies a receiver gets, the archive's files or the logs;
the marker shows where each was."""

from __future__ import annotations

import gzip
import json
import secrets
from pathlib import Path

import pytest
from django.apps import apps
from django.test import Client

from executions.models import Action, ExecutionEvent, ModelCall, StepRun
from sandbox.echo import echo
from tests.support import retention as archive
from tests.support.leaks import leaks
from tests.support.procs import http, wait_for
from tests.support.receivers import WebhookReceiver
from tests.support.stack import pk, wait_status

# No "sk-" prefix: the credential shape would hide a miss of the configured secrets.
KEY = "kq-" + secrets.token_urlsafe(33)
HOOK_SECRET = "hook-" + secrets.token_urlsafe(24)
MARK, HOOK_MARK = "[redacted: OPENAI_API_KEY]", "[redacted: KEEL_WEBHOOK_SECRET]"


@pytest.fixture(scope="module")
def receiver():
    hooks = WebhookReceiver(HOOK_SECRET)
    yield hooks
    hooks.close()


def fault(stack, endpoint: str, *, status: int = 200, count: int = 1, secret: str | None = None) -> None:
    body = {"endpoint": endpoint, "fault": "echo_secret", "status": status, "count": count, "secret": secret}
    answer = http().post(f"{stack.sandbox_url}/_faults", json=body, timeout=5)
    assert answer.status_code == 201, answer.text


def everything_stored() -> str:
    """Every row of every table of the project's apps, as text."""
    rows = []
    for model in apps.get_models():
        if model._meta.app_label in ("executions", "approvals", "artifacts", "metrics", "notifications"):
            rows += [json.dumps(r, default=str, ensure_ascii=False) for r in model.objects.values()]
    return "\n".join(rows)


def nothing_of_the_keys(text: str, where: str) -> None:
    assert not leaks(text, KEY), (where, leaks(text, KEY))
    assert not leaks(text, HOOK_SECRET), (where, leaks(text, HOOK_SECRET))


def test_a_provider_echoing_the_key_encoded_leaks_it_nowhere(stack, people, api_as, receiver, tmp_path, settings):
    receiver.echo = echo(HOOK_SECRET)  # the receiver quotes the webhook secret in its answers
    up = stack.up(
        KEEL_WEBHOOK_URL=receiver.url,
        KEEL_WEBHOOK_SECRET=HOOK_SECRET,
        worker_env={
            "RUNTIME_MODEL_CLIENT": "openai",
            "RUNTIME_MODEL": "gpt-test",
            "OPENAI_BASE_URL": f"{stack.sandbox_url}/v1",
            "OPENAI_API_KEY": KEY,
        },
    )
    fault(stack, "/v1/chat/completions", status=500)  # the route's first call: a 500 quoting the key
    fault(stack, "/v1/chat/completions", count=50)  # then every answer's text
    fault(stack, "/orders", secret=KEY)  # the receipt of the approved order
    fault(stack, "/notify", status=403, secret=KEY)  # the reply to the customer refused: needs attention
    requester, manager, operator = (api_as(people[p]) for p in ("requester", "manager", "operator"))
    ref = requester.post("/executions", {"workflow": "support_agent", "input": {"ticket": "TCK-1001"}}).json()["id"]

    approval = wait_status(requester, ref, "awaiting_approval", timeout=90)["pending_approval"]
    assert manager.decide(ref, approval).status_code == 202
    stopped = wait_status(requester, ref, "needs_attention", timeout=60)
    assert stopped["stuck"]["reason"] == "permission_denied" and MARK in stopped["stuck"]["detail"]
    hooks = {"execution.needs_attention"}  # (approval.requested only if a sweep saw the request pending)
    try:
        wait_for(lambda: {e["event"] for e in receiver.events(ref)} >= hooks, timeout=60, what="the webhooks")
    except AssertionError as exc:  # say what did arrive, and where the webhook actions are
        sent = [(r["code"], r["body"][:120]) for r in receiver.requests]
        actions = list(Action.objects.filter(type="webhook").values_list("key", "status", "last_error"))
        raise AssertionError(f"{exc}; received {sent}; webhook actions {actions}") from None
    wait_for(lambda: not Action.objects.filter(type="webhook", status="executing").exists(), what="the receipts")

    # Each path carried the marker where the key was: the echo reached every one.
    events = json.dumps(list(ExecutionEvent.objects.filter(execution_id=pk(ref)).values("payload")), default=str)
    journal = json.dumps(list(ModelCall.objects.filter(execution_id=pk(ref)).values("response", "request")))
    receipts = json.dumps([a.receipt for a in Action.objects.filter(execution_id=pk(ref))], default=str)
    [first_failure, *_] = StepRun.objects.filter(execution_id=pk(ref), outcome=StepRun.Outcome.FAILED).order_by("id")
    assert MARK in first_failure.error and MARK in events and MARK in journal and MARK in receipts
    assert HOOK_MARK in receipts  # the receiver's echo, in the webhook actions' receipts
    stored = everything_stored()
    nothing_of_the_keys(stored, "the database")

    page = Client()
    page.force_login(people["operator"].user)
    shown = [page.get(f"/executions/{ref}/").content.decode()]
    shown += [operator.get(path).text for path in (f"/executions/{ref}", f"/executions/{ref}/model-calls")]
    shown += [operator.get(f"/executions/{ref}/state").text, operator.get("/executions?status=needs_attention").text]
    nothing_of_the_keys("\n".join(shown), "the page and the API")
    assert MARK in shown[0]

    bodies = [seen["body"].decode() for seen in receiver.requests]
    nothing_of_the_keys("\n".join(bodies), "the webhook bodies")
    assert any(MARK in b for b in bodies)  # the needs_attention hook's stuck detail

    assert operator.post(f"/executions/{ref}/cancel", {"reason": "done with the echo"}).status_code == 200
    root = archive.archive_storage(settings, tmp_path / "store")  # pytest-django's settings: restored after
    done = archive.keel_archive(tmp_path, root, "--older-than", "0d", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["archived"] == 1, done.stdout + done.stderr
    files = sorted(Path(root, "archive").iterdir())
    assert any(f.name.endswith(".jsonl.gz") for f in files)
    archived = "\n".join(
        gzip.decompress(f.read_bytes()).decode() if f.name.endswith(".gz") else f.read_text() for f in files
    )
    assert MARK in archived
    nothing_of_the_keys(archived, "the archive")
    nothing_of_the_keys("".join(p.output() for p in up.all()), "the logs")
