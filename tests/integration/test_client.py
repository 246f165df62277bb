"""keel-client (clients/python) against a live keel: the sync and async clients end to
end, its errors, its pagination, its version check, that its models match the server's
OpenAPI document (drift), and that the package installs."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import get_args

import pytest
from django.test import Client
from pydantic import BaseModel

CLIENT_DIR = Path(__file__).resolve().parents[2] / "clients" / "python"
sys.path.insert(0, str(CLIENT_DIR))  # the package from its source, as `pip install -e` would

import keel_client  # noqa: E402
from keel_client import (  # noqa: E402
    AsyncKeelClient,
    Conflict,
    Forbidden,
    InvalidInput,
    KeelClient,
    NotFound,
    Timeout,
    Unauthorized,
    VersionMismatch,
)
from keel_client.models import MODELS  # noqa: E402

SHIPPED = {"tracking": "TRK-77"}


# --- no processes


def test_every_field_a_client_model_declares_is_in_the_servers_schema(db):
    document = Client().get("/api/openapi.json").json()
    assert document["info"]["version"] == keel_client.API_VERSION
    schemas = document["components"]["schemas"]
    for model in MODELS:
        assert model.SERVER_SCHEMA in schemas, f"{model.__name__}: no schema {model.SERVER_SCHEMA} on the server"
        properties = schemas[model.SERVER_SCHEMA]["properties"]
        missing = set(model.model_fields) - set(properties)
        assert not missing, f"{model.__name__} declares {sorted(missing)}, not in {model.SERVER_SCHEMA}"
        # A nested model mirrors the schema the server's property refers to.
        for name, field in model.model_fields.items():
            nested = [a for a in _flat(field.annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
            if nested:
                refs = json.dumps(properties[name])
                assert f"#/components/schemas/{nested[0].SERVER_SCHEMA}" in refs, (model.__name__, name, refs)


def _flat(annotation) -> list:
    args = get_args(annotation)
    return [annotation] if not args else [a for arg in args for a in _flat(arg)]


def test_the_package_installs_and_imports(tmp_path):
    source, target = tmp_path / "src", tmp_path / "site"
    shutil.copytree(CLIENT_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target)]
    done = subprocess.run([*pip, str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (target / "keel_client" / "py.typed").exists()
    probe = "import keel_client; print(keel_client.__file__, keel_client.API_VERSION, keel_client.KeelClient)"
    env = {**os.environ, "PYTHONPATH": str(target)}
    ran = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith(str(target / "keel_client")), ran.stdout


class _OtherVersion(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"openapi": "3.1.0", "info": {"title": "keel Task API", "version": "2"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_a_server_of_another_version_is_refused_naming_both():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OtherVersion)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = KeelClient(f"http://127.0.0.1:{server.server_port}", "keel_x")
        with client, pytest.raises(VersionMismatch) as refused:
            client.get("RUN_0001")
        assert (refused.value.expected, refused.value.server) == ("1", "2")
        assert "'1'" in str(refused.value) and "'2'" in str(refused.value)
    finally:
        server.shutdown()
        server.server_close()


# --- a live keel


def test_errors_pagination_and_cancel_on_a_live_server(stack, people):
    stack.up(beat=False, workers=0)  # nothing runs: the executions stay pending
    requester = KeelClient(stack.web_url, people["requester"].token)
    outsider = KeelClient(stack.web_url, people["outsider"].token)

    with pytest.raises(InvalidInput) as refused:
        requester.start("monthly_report", {"month": "1999-01"})
    assert refused.value.status == 422 and refused.value.field == "input.month", refused.value.errors
    with pytest.raises(InvalidInput) as refused:
        requester.start("no_such_workflow", {})
    assert refused.value.field == "workflow"
    with pytest.raises(NotFound):
        requester.get("RUN_999999")
    with pytest.raises(Unauthorized):
        KeelClient(stack.web_url, "keel_not-a-token").get("RUN_0001")

    started = [requester.start("monthly_report", {"month": "2026-08"}) for _ in range(51)]
    assert all(e.status == "pending" and e.workflow == "monthly_report" for e in started)
    again = requester.start("monthly_report", {"month": "2026-08"}, idempotency_key="aug")
    assert requester.start("monthly_report", {"month": "2026-08"}, idempotency_key="aug").id == again.id
    with pytest.raises(Conflict):
        requester.start("monthly_report", {"month": "2026-09"}, idempotency_key="aug")

    listed = [e.id for e in requester.list(workflow="monthly_report")]  # 52: two pages of 50
    assert sorted(listed) == sorted([e.id for e in started] + [again.id]) and len(set(listed)) == 52
    assert requester.page(workflow="monthly_report").next is not None
    assert [e.id for e in requester.list(status="completed")] == []

    ref = started[0].id
    with pytest.raises(Conflict):  # not waiting for a signal
        requester.signal(ref, "shipment_confirmed", SHIPPED)
    with pytest.raises(InvalidInput) as refused:
        requester.signal(ref, "", None)
    assert refused.value.field == "name"
    with pytest.raises(InvalidInput) as refused:
        requester.cancel(ref, "   ")
    assert refused.value.field == "reason"
    with pytest.raises(Forbidden):
        outsider.cancel(ref, "not theirs")
    cancelled = requester.cancel(ref, "changed my mind")
    assert cancelled.status == "cancelled" and cancelled.terminal
    with pytest.raises(Conflict):
        requester.cancel(ref, "again")
    assert [e.id for e in requester.list(status="cancelled")] == [ref]
    with pytest.raises(Timeout) as late:
        requester.wait(started[1].id, "completed", timeout=1, interval=0.2)
    assert late.value.last_status == "pending" and "pending" in str(late.value)


def test_sync_client_start_wait_decide_wait(stack, people):
    stack.up()
    with (
        KeelClient(stack.web_url, people["requester"].token) as requester,
        KeelClient(stack.web_url, people["manager"].token) as manager,
    ):
        started = requester.start("monthly_report", {"month": "2026-08"})
        waiting = requester.wait(started.id, "awaiting_approval", timeout=60)
        assert waiting.status == "awaiting_approval", waiting
        approval = waiting.pending_approval
        assert approval is not None and approval.artifact_version == 1 and len(approval.content_sha256) == 64
        with pytest.raises(Forbidden):  # not their own request
            requester.decide(started.id, approval, "approve")
        decided = manager.decide(started.id, approval, "approve", comment="fine", event_id=f"{started.id}:ok")
        assert (decided.decision, decided.decided_by, decided.event_id) == ("approve", "manager", f"{started.id}:ok")
        with pytest.raises(Conflict):  # already decided
            manager.decide(started.id, approval, "reject")
        done = requester.wait(started.id, "completed", timeout=60)
        assert done.status == "completed" and done.cost is not None
        assert [a.status for a in done.actions if a.type == "publish_report"] == ["succeeded"]


def test_async_client_end_to_end_with_a_signal(stack, people):
    stack.up()

    async def scenario() -> None:
        async with (
            AsyncKeelClient(stack.web_url, people["requester"].token) as requester,
            AsyncKeelClient(stack.web_url, people["manager"].token) as manager,
        ):

            async def report() -> None:
                started = await requester.start("monthly_report", {"month": "2026-07"})
                waiting = await requester.wait(started.id, "awaiting_approval", timeout=60)
                answer = await manager.decide(started.id, waiting, "approve")
                assert answer.execution_status in ("running", "pending", "completed"), answer
                done = await requester.wait(started.id, "completed", timeout=60)
                assert done.status == "completed"

            async def replacement() -> None:
                started = await requester.start("replacement_order", {"original_order": "ORD-1001"})
                waiting = await requester.wait(started.id, "awaiting_approval", timeout=60)
                await manager.decide(started.id, waiting.pending_approval, "approve")
                waiting = await requester.wait(started.id, "waiting", timeout=60)
                assert waiting.pending_gate is not None and waiting.pending_gate.kind == "wait"
                with pytest.raises(InvalidInput) as refused:
                    await requester.signal(started.id, "shipment_confirmed", {"tracking": "no spaces allowed"})
                assert refused.value.field == "payload.tracking", refused.value.errors
                signalled = await requester.signal(started.id, "shipment_confirmed", SHIPPED, event_id="ship-1")
                assert signalled.event_id == "ship-1"
                done = await requester.wait(started.id, "completed", timeout=60)
                assert done.status == "completed"

            await asyncio.gather(report(), replacement())
            async with AsyncKeelClient(stack.web_url, people["requester"].token) as third:
                listed = [e.workflow async for e in third.list(status="completed")]
            assert sorted(listed) == ["monthly_report", "replacement_order"]
            started = await requester.start("monthly_report", {"month": "2026-06"})
            cancelled = await requester.cancel(started.id, "not needed")
            assert cancelled.status == "cancelled"

    asyncio.run(scenario())
