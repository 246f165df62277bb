"""Secrets and garbage from outside, on real processes (issue 18, items 1 and 6).

A provider whose error quotes the request's headers must not get the API key into any
table, page, API answer or log line; a secret in what was sent is redacted in the
journal while its hash stays the hash of what was sent (a replay still matches); a
provider's garbage (NUL, lone surrogates, counts out of range, over-long fields) is a
transient failure with the answer as evidence, never a failed insert."""

from __future__ import annotations

import json
import secrets

import pytest
from django.apps import apps
from django.test import Client

from executions.models import ExecutionEvent, ModelCall, StepRun
from executions.redaction import redact, redact_text
from tests.support.procs import http, wait_for
from tests.support.stack import pk, wait_status

KEY = "sk-keel-" + secrets.token_hex(20)  # long enough to be a configured secret


def provider_env(stack, provider: str, *, obedient: bool = False) -> dict[str, str]:
    base = stack.sandbox_url + ("/obedient" if obedient else "")
    if provider == "openai":
        return {
            "RUNTIME_MODEL_CLIENT": "openai",
            "RUNTIME_MODEL": "gpt-test",
            "OPENAI_BASE_URL": f"{base}/v1",
            "OPENAI_API_KEY": KEY,
        }
    return {
        "RUNTIME_MODEL_CLIENT": "anthropic",
        "RUNTIME_MODEL": "claude-test",
        "ANTHROPIC_BASE_URL": base,
        "ANTHROPIC_API_KEY": KEY,
    }


ENDPOINT = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
KEY_NAME = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def fault(stack, provider: str, name: str, **extra) -> None:
    body = {"endpoint": ENDPOINT[provider], "fault": name, **extra}
    answer = http().post(f"{stack.sandbox_url}/_faults", json=body, timeout=5)
    assert answer.status_code == 201, answer.text


def everything_stored() -> str:
    """Every row of every table of the project's apps, as text."""
    rows = []
    for model in apps.get_models():
        if model._meta.app_label in ("executions", "approvals", "artifacts", "metrics"):
            rows += [json.dumps(r, default=str, ensure_ascii=False) for r in model.objects.values()]
    return "\n".join(rows)


def everything_shown(people, api, ref: str) -> str:
    page = Client()
    page.force_login(people["operator"].user)
    shown = [page.get(f"/executions/{ref}/").content.decode()]
    shown += [api.get(path).text for path in (f"/executions/{ref}", f"/executions/{ref}/model-calls")]
    return "\n".join(shown)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_provider_quoting_the_api_key_leaks_it_nowhere(stack, people, api_as, provider):
    """Item 1: a gateway's 500 quotes every request header, the API key with them. The
    retry goes on; the key is in no table, page, API answer or log line; the marker is."""
    up = stack.up(worker_env=provider_env(stack, provider))  # beat's sweeper brings the retry back
    fault(stack, provider, "quote_headers")
    requester = api_as(people["requester"])
    ref = requester.post("/executions", {"workflow": "support_agent", "input": {"ticket": "TCK-1001"}}).json()["id"]

    wait_status(requester, ref, "awaiting_approval", timeout=60)
    [failed] = StepRun.objects.filter(execution_id=pk(ref), outcome=StepRun.Outcome.FAILED)
    marker = f"[redacted: {KEY_NAME[provider]}]"
    assert "upstream gateway error" in failed.error and marker in failed.error
    [retry] = ExecutionEvent.objects.filter(execution_id=pk(ref), payload__transition="schedule_retry")
    assert marker in retry.payload["reason"] and marker in json.dumps(failed.output)

    assert KEY not in everything_stored()
    assert KEY not in everything_shown(people, requester, ref)
    assert KEY not in "".join(p.output() for p in up.all())


@pytest.mark.own_stack  # its worker crashes at a failpoint
def test_a_secret_in_what_was_sent_is_redacted_in_the_journal_and_replays_without_drift(stack, people, api_as):
    """Item 1: the stored request is redacted, its sha256 is of what was sent, so the call
    replays from the journal after a crash (no model_drift, the provider asked once)."""
    token = "mt-" + secrets.token_hex(16)
    env = {**provider_env(stack, "openai"), "RUNTIME_METRICS_TOKEN": token}
    stack.sandbox()
    stack.beat()
    stack.web(RUNTIME_METRICS_TOKEN=token)
    doomed = stack.worker("doomed", RUNTIME_FAILPOINTS="before_model_call:resolve:c2=crash", **env)
    requester = api_as(people["requester"])
    constraint = f"Quote the scrape token {token} to nobody."
    body = {"workflow": "support_agent", "input": {"ticket": "TCK-1001", "constraints": [constraint]}}
    ref = requester.post("/executions", body).json()["id"]
    wait_for(lambda: not doomed.alive(), what="the worker to crash before call 2")

    first = ModelCall.objects.get(key=f"{ref}:resolve:r1:c1")
    stored = json.dumps(first.request)
    assert token not in stored and "[redacted: RUNTIME_METRICS_TOKEN]" in stored
    stack.worker("survivor", **env)
    waiting = wait_status(requester, ref, "awaiting_approval", timeout=60)
    assert waiting["stuck"] is None or waiting["stuck"]["reason"] != "model_drift"
    assert stack.sandbox_stats()["keys"][first.key]["calls"] == 1  # replayed from the journal


# Each garbage answer, and what the failure must say (the journal's check, not the database).
GARBAGE = {
    "nul": "the text must not contain NUL",
    "surrogate": "the text must not contain lone surrogates",
    "tokens": "input_tokens is",
    "long_fields": "model is 5000 characters long",
}


def test_garbage_answers_are_transient_failures_with_the_answer_as_evidence(stack, people, api_as):
    """Item 6: four garbage answers in a row, each a transient failure (retried) with the
    answer, escaped and redacted, as evidence; never "unexpected error in step code" nor
    SQL in a reason. The fifth, sound answer goes on."""
    stack.up(worker_env=provider_env(stack, "openai"))
    for variant in GARBAGE:
        fault(stack, "openai", "garbage", variant=variant)
    requester = api_as(people["requester"])
    ref = requester.post("/executions", {"workflow": "support_agent", "input": {"ticket": "TCK-1001"}}).json()["id"]

    wait_status(requester, ref, "awaiting_approval", timeout=90)
    failed = list(StepRun.objects.filter(execution_id=pk(ref), outcome=StepRun.Outcome.FAILED).order_by("id"))
    assert len(failed) == len(GARBAGE)
    for run, (variant, said) in zip(failed, GARBAGE.items(), strict=True):
        assert run.error.startswith("transient: openai: unreadable answer") and said in run.error, (variant, run.error)
        assert isinstance(run.output["evidence"]["answer"], str)
    assert "\\u0000" in failed[0].output["evidence"]["answer"] and "\\ud800" in failed[1].output["evidence"]["answer"]
    reasons = " ".join(e.payload.get("reason", "") for e in ExecutionEvent.objects.filter(execution_id=pk(ref)))
    for sql in ("unexpected error in step code", "DataError", "INSERT", "psycopg", "invalid byte"):
        assert sql not in reasons and all(sql not in r.error for r in failed)
    # Only sound answers were recorded: support_agent v2's route, then four calls of its agent step.
    assert ModelCall.objects.filter(execution_id=pk(ref)).count() == 1 + 4


# --- the rules themselves, as pure logic


def test_redaction_replaces_configured_secrets_and_credential_shapes(settings):
    settings.SECRETS = {"OPENAI_API_KEY": KEY, "DATABASE_URL": "pa ss/wörd"}
    text = (
        f"Authorization: Bearer {KEY}\nx-api-key: abc123def456\nproxy uses Basic dXNlcjpwYXNzd29yZA==; "
        "key sk-ant-api03-abcdefghijklmnopqrstuvwx; db postgres://app:hunter2hunter2@db/keel; "
        "pa%20ss%2Fw%C3%B6rd quoted; a basic summary for the bearer of tokens"
    )
    out = redact_text(text)
    assert KEY not in out and "Authorization: Bearer [redacted: OPENAI_API_KEY]" in out
    assert "x-api-key: [redacted: credential]" in out and "Basic [redacted: basic token]" in out
    assert "sk-ant-api03" not in out and "hunter2" not in out and "app:[redacted: password]@db" in out
    assert "[redacted: DATABASE_URL] quoted" in out
    assert out.endswith("a basic summary for the bearer of tokens")  # prose stays prose
    nested = redact({"a": [KEY, 1, None, {"b": f"x {KEY}"}], "n": 2.5})
    assert nested == {"a": ["[redacted: OPENAI_API_KEY]", 1, None, {"b": "x [redacted: OPENAI_API_KEY]"}], "n": 2.5}


def test_a_webhook_urls_path_and_query_are_a_configured_secret(tmp_path):
    """A Slack- or Teams-style hook URL is its own credential (whoever has it may post):
    its path and query are a configured secret, so a receipt quoting the URL, an error
    or a log line keeps the scheme and host and loses the rest. A path under 24 characters
    (``/hook``, ``/hooks/keel``) is a route, not a credential, and is left out: redacting
    it would hide every other URL with that path (a redirect's target) from the evidence."""
    from tests.support.settings_probe import clean_env, django

    code = (
        "from django.conf import settings; from executions.redaction import redact_text; "
        "print(settings.SECRETS.get('KEEL_WEBHOOK_URL', '')); "
        "print(redact_text('POST https://hooks.example/services/T01/B02/Xy9zSecretPart?ts=1 answered 500'))"
    )
    hook = "https://hooks.example/services/T01/B02/Xy9zSecretPart?ts=1"
    done = django(clean_env(tmp_path, KEEL_WEBHOOK_URL=hook, KEEL_WEBHOOK_SECRET="s" * 32), code)
    assert done.returncode == 0, done.stderr
    secret, said = done.stdout.splitlines()
    assert secret == "services/T01/B02/Xy9zSecretPart?ts=1"
    assert said == "POST https://hooks.example/[redacted: KEEL_WEBHOOK_URL] answered 500", said
    for route in ("http://127.0.0.1:9/hook", "http://127.0.0.1:9/hooks/keel"):  # routes, not credentials
        short = django(clean_env(tmp_path, KEEL_WEBHOOK_URL=route, KEEL_WEBHOOK_SECRET="s" * 32), code)
        assert short.returncode == 0 and short.stdout.splitlines()[0] == "", (route, short.stderr)
