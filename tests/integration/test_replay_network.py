"""``keel replay`` calls nothing (issue 38, item 9.3): a team's compute step that calls
home past ``executions.authoring.http`` — urllib, http.client, requests, httpx and a raw
socket — makes its requests when it runs on a worker, and none when it is replayed: each
is refused at the socket (triage/network_guard.py) and reported with its step, while the
replay still reads the record."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from django.db import connection

from executions.models import Execution
from tests.support.procs import run_manage
from tests.support.receivers import WebhookReceiver
from tests.support.stack import wait_status
from triage.network_guard import NetworkRefused, refusing

MODULES = "tests.support.networked_flow"


@pytest.fixture
def home():
    receiver = WebhookReceiver("unused")
    yield receiver
    receiver.close()


def called_by(home: WebhookReceiver) -> list[str]:
    return sorted(r["path"].rsplit("by=", 1)[-1] for r in home.requests if "by=" in r.get("path", ""))


def test_replay_refuses_every_library_at_the_socket_and_reports_the_step(stack, people, api_as, home):
    stack.up(KEEL_WORKFLOW_MODULES=MODULES)
    requester = api_as(people["requester"])
    answer = requester.post("/executions", {"workflow": "phone_home", "input": {"url": home.url}})
    ref = answer.json()["id"]
    wait_status(requester, ref, "waiting")
    libraries = called_by(home)
    assert {"urllib", "http.client", "requests", "socket"} <= set(libraries), libraries  # they work on a worker
    seen = len(home.requests)

    done = run_manage("keel", "replay", "--id", ref, "--json", env={**stack.env, "KEEL_WORKFLOW_MODULES": MODULES})
    assert done.returncode == 0, done.stdout + done.stderr
    [item] = json.loads(done.stdout)["items"]
    assert item["verdict"] == "ok" and item["findings"] == []
    assert len(home.requests) == seen  # not one request during the replay
    refused = item["refused"]
    assert len(refused) == len(libraries) and {r["step"] for r in refused} == {"fetch"}, refused
    port = home.url.split(":")[2].split("/")[0]
    for r in refused:
        assert "refused, a replay calls nothing" in r["detail"], r
        assert f"127.0.0.1:{port} " in r["detail"] or f"localhost:{port} " in r["detail"], r
    assert any("via tests.support.networked_flow" in r["detail"] for r in refused)  # the raw socket's

    said = run_manage("keel", "replay", "--id", ref, env={**stack.env, "KEEL_WORKFLOW_MODULES": MODULES})
    assert said.returncode == 0 and said.stdout.count("refused at fetch:") == len(libraries), said.stdout
    assert len(home.requests) == seen


def test_inside_the_guard_the_database_works_and_nothing_else_connects(transactional_db, home):
    """In-process: a new database connection is made and used inside the guard; a request
    elsewhere is refused (and recorded) before it leaves; after it, the network is back."""
    connection.close()
    with refusing() as refused:
        assert Execution.objects.count() == 0  # a new connection to the configured database
        with pytest.raises(urllib.error.URLError) as raised:
            urllib.request.urlopen(home.url, timeout=5)
        assert isinstance(raised.value.reason, NetworkRefused)
    assert home.requests == [] and len(refused) == 1 and "via http.client" in refused[0].as_dict()["detail"]
    with pytest.raises(urllib.error.HTTPError):  # the receiver's 404 to a GET: it was reached
        urllib.request.urlopen(home.url, timeout=5)
    assert len(home.requests) == 1
