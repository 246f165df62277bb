"""Hostile input at the edge: every POST endpoint, the GETs' query and path parameters,
and every screen form. Integers past range, NUL, lone surrogates, 10 MB bodies and
wrong content types get a 4xx JSON naming the field (a message on a screen), and
nothing is written: the rows of every table we own are counted before and after."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from tests.support.records import snapshot
from tests.support.screens import logged_in

BIG = 2**31  # one past the integer columns
HUGE = 2**63
NUL = "a\x00b"
SURROGATE = "a\ud800b"  # sent as the JSON escape "\ud800"
TEN_MB = "x" * 10_000_000


# --- the API: POST endpoints


def endpoints(world: dict) -> dict[str, tuple[str, str, dict]]:
    """name → (who, path, a body that would be accepted)."""
    run, request = world["awaiting"].ref, world["request"]
    return {
        "start": ("requester", "/api/executions", {"workflow": "monthly_report", "input": {"month": "2026-08"}}),
        "decide": (
            "manager",
            f"/api/executions/{run}/events",
            {
                "type": "approval.decision",
                "approval_id": request.pk,
                "decision": "approve",
                "artifact_version": request.version,
                "content_sha256": request.content_sha256,
                "event_id": "event-1",
                "comment": "fine",
            },
        ),
        "cancel": ("operator", f"/api/executions/{run}/cancel", {"reason": "not needed"}),
        "redraft": ("requester", f"/api/executions/{run}/redraft", {"instruction": "shorter"}),
        "resume": ("operator", f"/api/executions/{world['paused'].ref}/resume", {"reason": "checked"}),
        "resolve": (
            "operator",
            f"/api/actions/{world['action'].key}/resolve",
            {"outcome": "succeeded", "evidence": "seen"},
        ),
        "restart": (
            "operator",
            f"/api/executions/{world['failed'].ref}/restart",
            {"from_step": "publish", "reason": "the provider is back"},
        ),
        "close": (
            "operator",
            f"/api/actions/{world['compensation'].key}/close",
            {"outcome": "succeeded", "evidence": "retracted at the provider"},
        ),
    }


def api_post(people, who: str, path: str, body: Any, content_type: str = "application/json", **extra):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return Client().generic(
        "POST", path, data, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {people[who].token}", **extra
    )


@pytest.mark.parametrize("name", ["start", "decide", "cancel", "redraft", "resume", "resolve", "restart", "close"])
def test_the_baseline_bodies_are_accepted(people, world, name):
    """The bodies the hostile table mutates are good ones: unchanged, each writes."""
    who, path, body = endpoints(world)[name]
    before = snapshot()
    response = api_post(people, who, path, body)
    assert 200 <= response.status_code < 300, response.content
    assert snapshot() != before


def set_path(body: dict, path: str, value: Any) -> dict:
    body = json.loads(json.dumps(body))
    *parents, last = path.split(".")
    target = body
    for part in parents:
        target = target[part]
    target[last] = value
    return body


# (endpoint, field path in the body, hostile value, the field the 422 must name)
BODY_CASES = [
    ("start", "workflow", NUL, "workflow"),
    ("start", "workflow", SURROGATE, "workflow"),
    ("start", "idempotency_key", NUL, "idempotency_key"),
    ("start", "idempotency_key", SURROGATE, "idempotency_key"),
    ("start", "input.month", NUL, "month"),
    ("start", "input.month", SURROGATE, "month"),
    ("start", "input.month", HUGE, "month"),
    ("start", "input.month", float("nan"), "month"),
    ("start", "input.constraints", [NUL], "constraints"),
    ("start", "input.constraints", [SURROGATE], "constraints"),
    ("start", "input.constraints", ["x" * 501], "constraints"),
    ("start", "input.constraints", [f"rule {i}" for i in range(21)], "constraints"),
    ("start", "input", {NUL: "key"}, "input"),
    ("decide", "approval_id", BIG, "approval_id"),
    ("decide", "approval_id", HUGE, "approval_id"),
    ("decide", "approval_id", -1, "approval_id"),
    ("decide", "artifact_version", BIG, "artifact_version"),
    ("decide", "artifact_version", 10**30, "artifact_version"),
    ("decide", "artifact_version", 0, "artifact_version"),
    ("decide", "content_sha256", NUL * 32, "content_sha256"),
    ("decide", "content_sha256", "A" * 64, "content_sha256"),
    ("decide", "content_sha256", "a" * 65, "content_sha256"),
    ("decide", "event_id", NUL, "event_id"),
    ("decide", "event_id", SURROGATE, "event_id"),
    ("decide", "comment", NUL, "comment"),
    ("decide", "comment", SURROGATE, "comment"),
    ("decide", "comment", "x" * 4001, "comment"),
    ("decide", "decision", NUL, "decision"),
    ("cancel", "reason", NUL, "reason"),
    ("cancel", "reason", SURROGATE, "reason"),
    ("redraft", "instruction", NUL, "instruction"),
    ("redraft", "instruction", SURROGATE, "instruction"),
    ("resume", "reason", NUL, "reason"),
    ("resume", "reason", SURROGATE, "reason"),
    ("resolve", "evidence", NUL, "evidence"),
    ("resolve", "evidence", SURROGATE, "evidence"),
    ("resolve", "outcome", NUL, "outcome"),
    ("restart", "from_step", NUL, "from_step"),
    ("restart", "from_step", SURROGATE, "from_step"),
    ("restart", "from_step", "x" * 101, "from_step"),
    ("restart", "from_step", "no_such_step", "from_step"),
    ("restart", "reason", NUL, "reason"),
    ("restart", "reason", "", "reason"),
    ("close", "evidence", NUL, "evidence"),
    ("close", "evidence", "", "evidence"),
    ("close", "outcome", "maybe", "outcome"),
]


def test_hostile_body_values_are_422_naming_the_field_and_write_nothing(people, world, subtests):
    before = snapshot()
    for name, field, value, named in BODY_CASES:
        with subtests.test(endpoint=name, field=field, value=repr(value)[:40]):
            who, path, body = endpoints(world)[name]
            response = api_post(people, who, path, set_path(body, field, value))
            assert response.status_code == 422, response.content
            assert response["Content-Type"].startswith("application/json")
            detail = response.json()["detail"]
            assert any(named in [str(p) for p in error["loc"]] or named in error["msg"] for error in detail), detail
            assert snapshot() == before


def test_a_10_mb_body_is_413_json_and_writes_nothing(people, world, subtests):
    before = snapshot()
    for name, (who, path, body) in endpoints(world).items():
        with subtests.test(endpoint=name):
            field = {
                "start": "workflow",
                "decide": "comment",
                "redraft": "instruction",
                "resolve": "evidence",
                "close": "evidence",
            }
            response = api_post(people, who, path, set_path(body, field.get(name, "reason"), TEN_MB))
            assert response.status_code == 413
            assert "1,000,000" in response.json()["detail"]
            assert snapshot() == before


def test_a_body_that_is_not_declared_json_is_415_and_writes_nothing(people, world, subtests):
    before = snapshot()
    for name, (who, path, body) in endpoints(world).items():
        for content_type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]:
            with subtests.test(endpoint=name, content_type=content_type):
                response = api_post(people, who, path, json.dumps(body), content_type=content_type)
                assert response.status_code == 415, response.content
                assert "application/json" in response.json()["detail"]
                assert snapshot() == before


def test_nul_in_a_path_parameter_is_422_naming_it(people, world, subtests):
    before = snapshot()
    for name, (who, path, body) in endpoints(world).items():
        if name == "start":
            continue
        for hostile in ("RUN_\x00", "\x00"):
            with subtests.test(endpoint=name, path_value=repr(hostile)):
                target = path
                for key in (world["action"].key, world["compensation"].key):
                    target = target.replace(key, f"k{hostile}")
                for execution in ("awaiting", "attention", "paused", "failed"):
                    target = target.replace(world[execution].ref, hostile)
                response = api_post(people, who, target, body)
                assert response.status_code == 422, response.content
                named = "key" if name in ("resolve", "close") else "execution_id"
                assert response.json()["detail"][0]["loc"] == ["path", named]
                assert snapshot() == before


# --- the API: query strings and path parameters of the GETs


GET_CASES = [
    ("/api/executions?status=%00", "status"),
    ("/api/executions?status=sleeping", "status"),
    ("/api/executions?workflow=%00", "workflow"),
    ("/api/executions?workflow=" + "w" * 101, "workflow"),
    ("/api/executions?cursor=%00", "cursor"),
    ("/api/executions?cursor=RUN_99999999999999999999", "cursor"),
    ("/api/executions?cursor=RUN_-1", "cursor"),
    ("/api/executions/RUN_%00", "execution_id"),
    ("/api/artifacts/REPORT_001/versions/2147483648/content", "n"),
    ("/api/artifacts/REPORT_001/versions/99999999999999999999999/content", "n"),
    ("/api/artifacts/REPORT_001/versions/0/content", "n"),
    ("/api/artifacts/REPORT_001/versions/-1/content", "n"),
    ("/api/artifacts/REPORT_001/versions/abc/content", "n"),
    ("/api/artifacts/REPORT%00/versions/1/content", "artifact_id"),
]
# A lone surrogate can't travel in a URL: its UTF-8 bytes are invalid and arrive replaced.
SURROGATE_URLS = [
    ("/api/executions?workflow=%ED%A0%80", 200),
    ("/api/executions/RUN_%ED%A0%80", 404),
    ("/api/artifacts/%ED%A0%80/versions/1/content", 404),
]


def test_hostile_query_and_path_values_of_the_gets_are_422_naming_them(people, world, subtests):
    client, auth = Client(), {"HTTP_AUTHORIZATION": f"Bearer {people['outsider'].token}"}
    for url, named in GET_CASES:
        with subtests.test(url=url):
            response = client.get(url, **auth)
            assert response.status_code == 422, response.content
            assert response.json()["detail"][0]["loc"][-1] == named
    for url, status in SURROGATE_URLS:
        with subtests.test(url=url):
            response = client.get(url, **auth)
            assert response.status_code == status and response["Content-Type"].startswith("application/json")


# --- every API error is JSON, Django's own included


def test_django_level_errors_under_the_api_are_json(people, world):
    client, auth = Client(), {"HTTP_AUTHORIZATION": f"Bearer {people['operator'].token}"}
    missing = client.get("/api/no-such-thing", **auth)
    assert missing.status_code == 404 and missing.json() == {"detail": "no such API endpoint"}
    wrong_method = client.delete("/api/executions", **auth)
    assert wrong_method.status_code == 405 and wrong_method.json()["detail"]
    assert "POST" in wrong_method["Allow"]
    unauthenticated = client.get("/api/executions")
    assert unauthenticated.status_code == 401 and unauthenticated.json()["detail"]
    bad_host = client.get("/api/executions", HTTP_HOST="evil.example", **auth)
    assert bad_host.status_code == 400 and bad_host.json() == {"detail": "bad request"}


def test_an_unhandled_exception_under_the_api_is_a_json_500(people, world, monkeypatch):
    """The one place this suite breaks code on purpose: a selector that raises, standing
    in for any bug; the answer must still be JSON (and the error logged)."""
    from executions import selectors

    def broken(**_kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(selectors, "execution_page", broken)
    client = Client(raise_request_exception=False)
    response = client.get("/api/executions", HTTP_AUTHORIZATION=f"Bearer {people['operator'].token}")
    assert response.status_code == 500
    assert response.json() == {"detail": "internal error: it was logged; the request may not have been applied"}


# --- the screens' forms


def forms(world: dict) -> dict[str, tuple[str, str, dict]]:
    """name → (who, URL, a form that would be accepted)."""
    run, attention, request = world["awaiting"].ref, world["attention"].ref, world["request"]
    return {
        "start": ("requester", "/executions/start/", {"workflow": "monthly_report", "month": "2026-08"}),
        "decide": (
            "manager",
            f"/executions/{run}/approvals/{request.pk}/decide/",
            {
                "decision": "approve",
                "artifact_version": str(request.version),
                "content_sha256": request.content_sha256,
                "event_id": "form-event-1",
                "comment": "",
            },
        ),
        "cancel": ("operator", f"/executions/{run}/cancel/", {"reason": "not needed"}),
        "redraft": ("requester", f"/executions/{run}/redraft/", {"instruction": "shorter"}),
        "resume": ("operator", f"/executions/{world['paused'].ref}/resume/", {"reason": "checked"}),
        "resolve": (
            "operator",
            f"/executions/{attention}/resolve/",
            {"key": world["action"].key, "outcome": "succeeded", "evidence": "seen"},
        ),
        "restart": (
            "operator",
            f"/executions/{world['failed'].ref}/restart/",
            {"from_step": "publish", "reason": "the provider is back"},
        ),
        "close": (
            "operator",
            f"/executions/{world['compensation'].execution.ref}/compensations/close/",
            {"key": world["compensation"].key, "outcome": "succeeded", "evidence": "retracted at the provider"},
        ),
    }


@pytest.mark.parametrize("name", ["start", "decide", "cancel", "redraft", "resume", "resolve", "restart", "close"])
def test_the_baseline_forms_are_accepted(people, world, name):
    who, url, form = forms(world)[name]
    before = snapshot()
    response = logged_in(people[who]).post(url, form, follow=True)
    assert response.status_code == 200
    assert snapshot() != before


FORM_CASES = [
    ("start", "workflow", NUL, "workflow"),
    ("start", "month", NUL, "month"),
    ("decide", "artifact_version", str(BIG), "artifact_version"),
    ("decide", "artifact_version", "99999999999999999999", "artifact_version"),
    ("decide", "artifact_version", "-1", "artifact_version"),
    ("decide", "content_sha256", "a" * 63 + "\x00", "content_sha256"),
    ("decide", "event_id", NUL, "event_id"),
    ("decide", "comment", NUL, "comment"),
    ("decide", "decision", NUL, "decision"),
    ("cancel", "reason", NUL, "reason"),
    ("redraft", "instruction", NUL, "instruction"),
    ("resume", "reason", NUL, "reason"),
    ("resolve", "key", NUL, "key"),
    ("resolve", "evidence", NUL, "evidence"),
    ("restart", "from_step", NUL, "from_step"),
    ("restart", "from_step", "no_such_step", "from_step"),
    ("restart", "reason", NUL, "reason"),
    ("close", "key", NUL, "key"),
    ("close", "evidence", NUL, "evidence"),
    ("close", "outcome", "maybe", "outcome"),
]


def test_hostile_form_values_are_a_message_on_the_page_and_write_nothing(people, world, subtests):
    """The message names the field ("reason: must not contain NUL characters"), on the
    page a plain POST is redirected to and in the card an htmx POST swaps in."""
    before = snapshot()
    clients = {who: logged_in(people[who]) for who in ("requester", "manager", "operator")}
    for name, field, value, named in FORM_CASES:
        for htmx in (False, True):
            with subtests.test(form=name, field=field, htmx=htmx):
                who, url, form = forms(world)[name]
                extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
                response = clients[who].post(url, {**form, field: value}, follow=True, **extra)
                # The resolve form (beside its card, or the message in the page's messages
                # for a key of no unknown outcome there), the cancel's confirmation and the
                # redraft, restart and close forms are the page again with what was typed
                # (422); the other refusals redirect to a page with the message.
                shown_again = (name, field) == ("cancel", "reason") or name in (
                    "resolve",
                    "redraft",
                    "restart",
                    "close",
                )
                assert response.status_code == (422 if shown_again else 200)
                page = response.content.decode()
                assert f"{named}: " in page, page[-3000:]
                assert snapshot() == before
    with subtests.test(form="decide", field="approval_id in the URL"):
        _, url, form = forms(world)["decide"]
        target = url.replace(f"/approvals/{world['request'].pk}/", f"/approvals/{BIG}/")
        response = clients["manager"].post(target, form, follow=True)
        assert response.status_code == 200 and "approval_id: " in response.content.decode()
        assert snapshot() == before


def test_a_10_mb_or_non_form_body_to_a_form_is_refused_with_a_sentence_and_writes_nothing(people, world, subtests):
    before = snapshot()
    for name, (who, url, form) in forms(world).items():
        client = logged_in(people[who])
        with subtests.test(form=name, body="10 MB"):
            response = client.post(url, {**form, "padding": TEN_MB})
            assert response.status_code == 413 and "too much data" in response.content.decode()
            assert snapshot() == before
        for content_type in ("application/json", "text/plain"):
            with subtests.test(form=name, content_type=content_type):
                response = client.generic("POST", url, json.dumps(form), content_type=content_type)
                assert response.status_code == 415 and "send it from the page" in response.content.decode()
                assert snapshot() == before
