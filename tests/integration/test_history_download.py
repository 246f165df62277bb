"""Issue 39 (what users of the peers' dashboards look for): an execution's whole event
history downloadable as JSON Lines (Temporal's "download event history"), from the API and
from a link on the execution page, for whoever may read the execution."""

from __future__ import annotations

import json

from django.test import Client

from executions import pauses, services
from executions.models import ExecutionEvent


def test_an_execution_s_history_downloads_as_json_lines(people):
    """Issue 39: the history, oldest first, one event a line, as stored (redacted when
    written); any signed-in user may read it (401 without credentials, 404 unknown, 422 a
    malformed id as for the execution); the execution page links it."""
    execution = services.execution_start(
        user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"}
    )[0]
    pauses.execution_pause(ref=execution.ref, user=people["operator"].user, reason="provider outage")
    url = f"/api/executions/{execution.ref}/history.jsonl"

    answer = Client(HTTP_AUTHORIZATION=f"Bearer {people['outsider'].token}").get(url)
    assert answer.status_code == 200, answer.status_code
    assert answer["Content-Type"] == "application/jsonl"
    assert answer["Content-Disposition"] == f'attachment; filename="{execution.ref}-history.jsonl"'
    lines = [json.loads(line) for line in b"".join(answer.streaming_content).decode().splitlines()]
    stored = list(ExecutionEvent.objects.filter(execution=execution).order_by("id"))
    assert [line["event_id"] for line in lines] == [e.pk for e in stored] and len(lines) >= 2
    paused = lines[-1]
    assert paused["type"] == "transition" and paused["to_status"] == "paused" and paused["actor"] == "operator"
    assert paused["payload"]["reason"] == "provider outage" and paused["execution"] == execution.ref
    assert set(paused) == {
        "event_id",
        "time",
        "type",
        "execution",
        "step",
        "from_status",
        "to_status",
        "actor",
        "payload",
    }

    assert Client().get(url).status_code == 401
    api = Client(HTTP_AUTHORIZATION=f"Bearer {people['requester'].token}")
    assert api.get("/api/executions/RUN_999999/history.jsonl").status_code == 404
    malformed = api.get("/api/executions/RUN_X")  # a malformed id: answered as for the execution itself
    assert api.get("/api/executions/RUN_X/history.jsonl").status_code == malformed.status_code

    page = Client()
    page.force_login(people["requester"].user)
    html = page.get(f"/executions/{execution.ref}/").content.decode()
    assert f'href="{url}"' in html and 'id="download-history"' in html
