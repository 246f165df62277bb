"""Sandbox services, exercised as a real subprocess over real HTTP.

No Django database is involved: the sandbox keeps its own SQLite file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import requests

from tests.support.procs import Proc, free_port, responds

pytestmark = pytest.mark.processes  # sandboxes of their own (restarts, modes)

PUBLISH = {
    "artifact_id": "REPORT_001",
    "version": 2,
    "sha256": "ab" * 32,
    "title": "Q3 report",
    "content": "# Q3\n\nAll good.",
    "audience": "management",
}
ORDER = {"reference": "RUN_0001:submit_order:v1", "original_order": "ORD-1001", "items": [{"sku": "SKU-1", "qty": 2}]}
NOTE = {"channel": "email", "to": ["ops@example.com"], "subject": "Done", "body": "Report is out."}


class Sandbox:
    """A ``python -m sandbox.server`` process (tests/support/procs.py) and a tiny client for it."""

    def __init__(self, db_path: Path, log: Path, orders_mode: str = "idempotent"):
        self.db_path, self.log, self.orders_mode = db_path, log, orders_mode
        self.proc: Proc | None = None
        self.base_url = ""

    def start(self) -> Sandbox:
        port = free_port()
        self.base_url = f"http://127.0.0.1:{port}"
        args = [sys.executable, "-m", "sandbox.server", "--port", str(port), "--db", str(self.db_path)]
        self.proc = Proc("sandbox", [*args, "--orders-mode", self.orders_mode], dict(os.environ), self.log)
        self.proc.wait_until(lambda: responds(f"{self.base_url}/_health"), what="the sandbox to listen")
        return self

    def stop(self) -> None:
        if self.proc:
            self.proc.stop(timeout=5)

    def get(self, path: str, **kwargs) -> requests.Response:
        return requests.get(self.base_url + path, timeout=kwargs.pop("timeout", 5), **kwargs)

    def post(self, path: str, json=None, key: str | None = None, **kwargs) -> requests.Response:
        headers = {"Idempotency-Key": key} if key else {}
        return requests.post(
            self.base_url + path, json=json, headers=headers, timeout=kwargs.pop("timeout", 5), **kwargs
        )

    def stats(self) -> dict:
        return self.get("/_stats").json()

    def fault(self, **spec) -> None:
        response = self.post("/_faults", json=spec)
        assert response.status_code == 201, response.text


@pytest.fixture
def start_sandbox(tmp_path):
    """Factory starting sandbox subprocesses; all are terminated at teardown."""
    started: list[Sandbox] = []

    def start(db_path: Path | None = None, orders_mode: str = "idempotent") -> Sandbox:
        log = tmp_path / f"sandbox-{len(started)}.log"
        sandbox = Sandbox(db_path or tmp_path / "sandbox.sqlite3", log, orders_mode).start()
        started.append(sandbox)
        return sandbox

    yield start
    for sandbox in started:
        sandbox.stop()


@pytest.fixture
def sandbox(start_sandbox) -> Sandbox:
    return start_sandbox()


# -- publish -------------------------------------------------------------------


def test_publish_then_replay_is_one_effect_two_calls(sandbox):
    first = sandbox.post("/reports/publish", PUBLISH, key="RUN_0001:publish:v1")
    again = sandbox.post("/reports/publish", PUBLISH, key="RUN_0001:publish:v1")

    assert first.status_code == 201
    assert first.json() == {
        "publication_id": "PUB-0001",
        "key": "RUN_0001:publish:v1",
        "status": "published",
        "replayed": False,
    }
    assert again.status_code == 200
    assert again.json()["publication_id"] == "PUB-0001"
    assert again.json()["replayed"] is True
    stats = sandbox.stats()
    assert stats["endpoints"]["/reports/publish"] == {"calls": 2, "effects": 1}
    assert stats["keys"]["RUN_0001:publish:v1"] == {"calls": 2, "effects": 1}


def test_publish_ids_are_sequential_and_key_is_required(sandbox):
    assert sandbox.post("/reports/publish", PUBLISH, key="a").json()["publication_id"] == "PUB-0001"
    assert sandbox.post("/reports/publish", PUBLISH, key="b").json()["publication_id"] == "PUB-0002"
    missing = sandbox.post("/reports/publish", PUBLISH)
    assert missing.status_code == 400
    assert "error" in missing.json()


def test_publish_same_key_different_body_conflicts(sandbox):
    sandbox.post("/reports/publish", PUBLISH, key="k")
    conflict = sandbox.post("/reports/publish", {**PUBLISH, "version": 3}, key="k")

    assert conflict.status_code == 409
    assert conflict.json() == {"error": "idempotency key reused with different arguments"}
    assert sandbox.stats()["endpoints"]["/reports/publish"]["effects"] == 1


def test_publication_lookup_by_key(sandbox):
    sandbox.post("/reports/publish", PUBLISH, key="k1")

    found = sandbox.get("/reports/publications", params={"key": "k1"})
    missing = sandbox.get("/reports/publications", params={"key": "nope"})

    assert found.status_code == 200
    [publication] = found.json()["publications"]
    assert publication["publication_id"] == "PUB-0001"
    assert publication["artifact_id"] == "REPORT_001"
    assert publication["version"] == 2
    assert missing.json() == {"publications": []}
    assert sandbox.stats()["endpoints"]["/reports/publications"] == {"calls": 2, "effects": 0}


# -- orders ----------------------------------------------------------------------


def test_orders_idempotent_mode_replays(sandbox):
    first = sandbox.post("/orders", ORDER, key="RUN_0001:submit_order:v1")
    again = sandbox.post("/orders", ORDER, key="RUN_0001:submit_order:v1")

    assert first.status_code == 201
    assert first.json()["order_id"] == "ORD-9001"
    assert first.json()["status"] == "submitted"
    assert first.json()["key"] == "RUN_0001:submit_order:v1"
    assert again.status_code == 200
    assert again.json()["order_id"] == "ORD-9001"
    assert sandbox.stats()["endpoints"]["/orders"] == {"calls": 2, "effects": 1}
    found = sandbox.get("/orders", params={"key": "RUN_0001:submit_order:v1"}).json()["orders"]
    assert [order["order_id"] for order in found] == ["ORD-9001"]


def test_orders_reference_mode_creates_every_time(start_sandbox):
    sandbox = start_sandbox(orders_mode="reference")
    first = sandbox.post("/orders", ORDER, key="ignored")
    second = sandbox.post("/orders", ORDER, key="ignored")

    assert (first.status_code, second.status_code) == (201, 201)
    assert [first.json()["order_id"], second.json()["order_id"]] == ["ORD-9001", "ORD-9002"]
    assert first.json()["key"] is None
    found = sandbox.get("/orders", params={"reference": ORDER["reference"]}).json()["orders"]
    assert [order["order_id"] for order in found] == ["ORD-9001", "ORD-9002"]
    assert found[0]["original_order"] == "ORD-1001"
    assert sandbox.get("/orders", params={"key": "ignored"}).json() == {"orders": []}
    assert sandbox.stats()["keys"]["ignored"] == {"calls": 2, "effects": 2}


def test_reference_mode_counts_under_reference_without_header(start_sandbox):
    sandbox = start_sandbox(orders_mode="reference")
    sandbox.post("/orders", ORDER)

    assert sandbox.stats()["keys"][ORDER["reference"]] == {"calls": 1, "effects": 1}


def test_config_switches_orders_mode(sandbox):
    assert sandbox.get("/_config").json()["orders_idempotent"] is True
    switched = sandbox.post("/_config", {"orders_idempotent": False})
    assert switched.status_code == 200
    assert switched.json()["orders_idempotent"] is False

    sandbox.post("/orders", ORDER, key="k")
    sandbox.post("/orders", ORDER, key="k")
    assert sandbox.stats()["endpoints"]["/orders"]["effects"] == 2

    sandbox.post("/_config", {"orders_idempotent": True})
    sandbox.post("/orders", ORDER, key="k2")
    sandbox.post("/orders", ORDER, key="k2")
    assert sandbox.stats()["endpoints"]["/orders"]["effects"] == 3
    assert sandbox.post("/_config", {"orders_idempotent": "yes"}).status_code == 400


# -- notify ----------------------------------------------------------------------


def test_notify_replays_with_same_key(sandbox):
    first = sandbox.post("/notify", NOTE, key="RUN_0001:notify:v1")
    again = sandbox.post("/notify", NOTE, key="RUN_0001:notify:v1")

    assert first.status_code == 201
    assert first.json()["notification_id"] == "NTF-0001"
    assert first.json()["replayed"] is False
    assert (again.status_code, again.json()["replayed"]) == (200, True)
    found = sandbox.get("/notifications", params={"key": "RUN_0001:notify:v1"}).json()
    assert [n["to"] for n in found["notifications"]] == [["ops@example.com"]]
    assert sandbox.stats()["endpoints"]["/notify"] == {"calls": 2, "effects": 1}


# -- faults ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault, status, error",
    [
        ("error_500", 500, "injected server error"),
        ("error_400", 400, "injected invalid input"),
        ("error_422", 422, "injected unprocessable input"),
        ("error_403", 403, "injected permission denied"),
    ],
)
def test_error_faults_answer_without_effect(sandbox, fault, status, error):
    sandbox.fault(endpoint="/reports/publish", fault=fault, count=1)

    failed = sandbox.post("/reports/publish", PUBLISH, key="k")
    recovered = sandbox.post("/reports/publish", PUBLISH, key="k")

    assert (failed.status_code, failed.json()["error"]) == (status, error)
    assert recovered.status_code == 201
    assert sandbox.stats()["keys"]["k"] == {"calls": 2, "effects": 1}


def test_rate_limit_sets_retry_after_and_faults_queue_in_order(sandbox):
    sandbox.fault(endpoint="/reports/publish", fault="rate_limit", count=2, retry_after=2)
    sandbox.fault(endpoint="/reports/publish", fault="error_500")
    assert [f["fault"] for f in sandbox.get("/_faults").json()["faults"]] == ["rate_limit", "error_500"]

    codes = [sandbox.post("/reports/publish", PUBLISH, key="k") for _ in range(4)]

    assert [r.status_code for r in codes] == [429, 429, 500, 201]
    assert codes[0].headers["Retry-After"] == "2"
    assert codes[0].json()["error"]
    assert sandbox.get("/_faults").json() == {"faults": []}


def test_timeout_fault_commits_nothing(sandbox):
    sandbox.fault(endpoint="/reports/publish", fault="timeout", hang_seconds=2)

    with pytest.raises(requests.ReadTimeout):
        sandbox.post("/reports/publish", PUBLISH, key="k", timeout=0.5)

    assert sandbox.stats()["endpoints"]["/reports/publish"] == {"calls": 1, "effects": 0}
    assert sandbox.get("/reports/publications", params={"key": "k"}).json() == {"publications": []}


def test_commit_then_hang_commits_the_effect(sandbox):
    sandbox.fault(endpoint="/reports/publish", fault="commit_then_hang", hang_seconds=2)

    with pytest.raises(requests.ReadTimeout):
        sandbox.post("/reports/publish", PUBLISH, key="k", timeout=0.5)

    assert sandbox.stats()["endpoints"]["/reports/publish"] == {"calls": 1, "effects": 1}
    [publication] = sandbox.get("/reports/publications", params={"key": "k"}).json()["publications"]
    assert publication["publication_id"] == "PUB-0001"
    replay = sandbox.post("/reports/publish", PUBLISH, key="k")
    assert (replay.status_code, replay.json()["replayed"]) == (200, True)


def test_fault_validation_and_clearing(sandbox):
    assert sandbox.post("/_faults", {"endpoint": "/nope", "fault": "error_500"}).status_code == 400
    assert sandbox.post("/_faults", {"endpoint": "/orders", "fault": "explode"}).status_code == 400
    assert sandbox.post("/_faults", {"endpoint": "/orders", "fault": "error_500", "count": 0}).status_code == 400
    sandbox.fault(endpoint="/orders", fault="error_500", count=3)

    cleared = requests.delete(sandbox.base_url + "/_faults", timeout=5)

    assert cleared.status_code == 200
    assert sandbox.get("/_faults").json() == {"faults": []}
    assert sandbox.post("/orders", ORDER, key="k").status_code == 201


# -- control & robustness ----------------------------------------------------------


def test_reset_empties_everything(sandbox):
    sandbox.post("/reports/publish", PUBLISH, key="k")
    sandbox.post("/orders", ORDER, key="k")
    sandbox.fault(endpoint="/notify", fault="error_500")

    assert sandbox.post("/_reset").json()["reset"] is True

    assert sandbox.stats() == {"endpoints": {}, "keys": {}}
    assert sandbox.get("/_faults").json() == {"faults": []}
    assert sandbox.get("/orders").json() == {"orders": []}
    assert sandbox.post("/reports/publish", PUBLISH, key="k").json()["publication_id"] == "PUB-0001"


def test_bad_requests_get_json_errors(sandbox):
    unknown = sandbox.get("/nowhere")
    malformed = requests.post(
        sandbox.base_url + "/notify", data="{not json", headers={"Content-Type": "application/json"}, timeout=5
    )

    assert (unknown.status_code, "error" in unknown.json()) == (404, True)
    assert (malformed.status_code, "error" in malformed.json()) == (400, True)
    assert sandbox.get("/_health").json() == {"ok": True}
    assert "/_health" not in sandbox.stats()["endpoints"]


def test_stats_survive_a_restart(start_sandbox, tmp_path):
    db_path = tmp_path / "persist" / "sandbox.sqlite3"
    first = start_sandbox(db_path)
    first.post("/reports/publish", PUBLISH, key="k")
    first.post("/reports/publish", PUBLISH, key="k")
    first.stop()

    second = start_sandbox(db_path)

    assert second.stats()["keys"]["k"] == {"calls": 2, "effects": 1}
    assert second.post("/reports/publish", PUBLISH, key="k").json()["replayed"] is True
