"""The helper for workflow authors (docs/authoring.md, "Writing tests for it"): run a
workflow to completion on keel's real processes — the offline model, the sandbox as the
fake provider, failpoints when asked — through the API, as its users would.

    from tests.support.authoring import Author

    def test_my_flow(stack, people, api_as):
        author = Author(stack, people, api_as, modules="myflows.expense")
        done = author.run("expense_approval", {"employee": "ana", ...})
        assert done["status"] == "completed"
        assert author.provider_calls(f"{done['id']}:pay:v1") == {"calls": 1, "effects": 1}

``Author(..., failpoints="after_effect_call:pay=sleep:1")`` starts the workers with
``RUNTIME_FAILPOINTS`` (executions.engine.failpoints). ``run`` approves every approval as
the manager (or ``decide="reject"``), delivers ``signals`` ({name: payload}) when the
execution waits for them, and returns the execution as ``GET /api/executions/{id}`` shows it.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.support.stack import wait_status

TERMINAL = {"completed", "failed", "cancelled"}


class Author:
    def __init__(self, stack, people, api_as, *, modules: str, failpoints: str = "", **env: str) -> None:
        worker_env = {"RUNTIME_FAILPOINTS": failpoints} if failpoints else {}
        stack.up(KEEL_WORKFLOW_MODULES=modules, worker_env=worker_env, **env)
        self.stack = stack
        self.requester = api_as(people["requester"])
        self.manager = api_as(people["manager"])

    def start(self, workflow: str, data: dict[str, Any]):
        return self.requester.post("/executions", {"workflow": workflow, "input": data})

    def run(
        self, workflow: str, data: dict[str, Any], *, decide: str = "approve", signals=None, timeout: float = 60
    ) -> dict[str, Any]:
        answer = self.start(workflow, data)
        assert answer.status_code == 201, answer.text
        ref = answer.json()["id"]
        signals = dict(signals or {})
        ends = time.monotonic() + timeout
        while time.monotonic() < ends:
            shown = self.requester.get(f"/executions/{ref}").json()
            if shown["status"] in TERMINAL:
                return shown
            if shown["status"] == "awaiting_approval" and shown["pending_approval"]:
                assert self.manager.decide(ref, shown["pending_approval"], decision=decide).status_code == 202
            gate = shown.get("pending_gate") or {}
            if shown["status"] == "waiting" and gate.get("waiting_for") in signals:
                name = gate["waiting_for"]
                assert self.requester.signal(ref, name, signals.pop(name), uuid.uuid4().hex).status_code == 202
            if shown["status"] == "needs_attention":
                return shown
            time.sleep(0.2)
        return wait_status(self.requester, ref, "completed", timeout=1)

    def provider_calls(self, key: str) -> dict[str, int]:
        """What the sandbox (the fake provider) saw under this ledger key."""
        return self.stack.sandbox_stats()["keys"].get(key, {"calls": 0, "effects": 0})
