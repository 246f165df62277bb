"""The Task API as the fuzzer speaks it: one HTTP session per person, every answer
recorded, so a 5xx or a request that got no answer at all (the web server is never
killed) is a violation wherever it happened."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import requests

from tests.support.procs import http


@dataclass
class Answers:
    """What the web server answered over a run: every status code, and the bad ones."""

    codes: dict[int, int] = field(default_factory=dict)
    bad: list[str] = field(default_factory=list)  # "<METHOD> <path> → 5xx …" and requests never answered

    def record(self, method: str, path: str, response: requests.Response | None, error: str = "") -> None:
        if response is None:
            self.bad.append(f"{method} {path} got no answer: {error}")
            return
        self.codes[response.status_code] = self.codes.get(response.status_code, 0) + 1
        if response.status_code >= 500:
            self.bad.append(f"{method} {path} → {response.status_code} {response.text[:300]}")


class Api:
    """``/api`` at ``base_url`` as the holder of ``token``; each answer goes to ``answers``."""

    def __init__(self, base_url: str, token: str, answers: Answers) -> None:
        self.base = base_url.rstrip("/") + "/api"
        self.session = http(token)
        self.answers = answers

    def call(self, method: str, path: str, body: dict | None = None) -> requests.Response | None:
        try:
            response = self.session.request(method, self.base + path, json=body, timeout=20)
        except requests.RequestException as exc:
            self.answers.record(method, path, None, f"{type(exc).__name__}: {exc}")
            return None
        self.answers.record(method, path, response)
        return response

    def get(self, path: str) -> Any:
        """The JSON of a 200, else None (the answer is recorded either way)."""
        response = self.call("GET", path)
        return response.json() if response is not None and response.status_code == 200 else None

    def post(self, path: str, body: dict) -> requests.Response | None:
        return self.call("POST", path, body)

    def executions(self, workflow: str) -> list[dict]:
        """Every execution of ``workflow`` as the list shows it, page after page."""
        found, cursor = [], ""
        while True:
            page = self.get(f"/executions?workflow={workflow}" + (f"&cursor={cursor}" if cursor else ""))
            if page is None:
                return found
            found += page["items"]
            cursor = page.get("next")
            if not cursor:
                return found

    def decide(self, ref: str, approval: dict, decision: str, event_id: str) -> requests.Response | None:
        body = {
            "type": "approval.decision",
            "approval_id": approval["id"],
            "decision": decision,
            "artifact_version": approval["artifact_version"],
            "content_sha256": approval["content_sha256"],
            "event_id": event_id,
            **({"comment": "fuzz: revise it"} if decision == "request_changes" else {}),
        }
        return self.post(f"/executions/{ref}/events", body)

    def signal(self, ref: str, name: str, event_id: str) -> requests.Response | None:
        return self.post(
            f"/executions/{ref}/events", {"type": "signal", "name": name, "payload": None, "event_id": event_id}
        )


def event_id() -> str:
    return uuid.uuid4().hex
