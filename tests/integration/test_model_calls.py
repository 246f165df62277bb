"""The model-call journal as the API and the execution page show it, the start form of
the support agent, and the pure parts of agents: tool arguments (fail closed), the
context's token budget, canonical JSON, the offline model's tool-calling policy."""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import Client

from executions.agent.modelclient import OfflineModelClient
from executions.authoring import notes
from executions.authoring.modelcalls import ModelRequest, ToolCall, canonical_json
from executions.authoring.tools import Progress, Refused
from executions.engine import runner
from executions.models import ModelCall, Status
from executions.services import execution_start
from workflows import support_agent

# docs/design.md §6: the fields of GET /api/executions/{id}/model-calls.
CONTRACT_FIELDS = {
    "key",
    "step",
    "seq",
    "model",
    "model_returned",
    "prompt_version",
    "request_sha256",
    "input_tokens",
    "output_tokens",
    "latency_ms",
    "tool_calls",
    "created_at",
}


def logged_in(person) -> Client:
    client = Client()
    client.force_login(person.user)
    return client


@pytest.fixture
def analyzed(people, transactional_db):
    """A monthly report run in-process (offline model) up to its approval gate."""
    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"})
    assert runner.advance(execution.pk, worker="worker:test") == "stopped"
    execution.refresh_from_db()
    assert execution.status == Status.AWAITING_APPROVAL
    return execution


def test_the_api_lists_the_journal_with_the_contract_fields(analyzed, people):
    response = logged_in(people["outsider"]).get(f"/api/executions/{analyzed.ref}/model-calls")
    assert response.status_code == 200
    [item] = response.json()["items"]
    assert set(item) >= CONTRACT_FIELDS
    call = ModelCall.objects.get(execution=analyzed)
    assert item["key"] == f"{analyzed.ref}:analyze:r1:c1" == call.key
    assert (item["step"], item["seq"], item["model"], item["model_returned"]) == (
        "analyze",
        1,
        "offline-deterministic-1",
        "offline-deterministic-1",
    )
    assert item["prompt_version"] == "monthly-analysis-v1" and item["tool_calls"] == []
    assert item["request_sha256"] == hashlib.sha256(canonical_json(call.request)).hexdigest()
    assert analyzed.context["prompts"] == {"analyze": "monthly-analysis-v1"}  # pinned at start


def test_the_api_answers_404_for_an_unknown_execution_and_401_without_credentials(people, transactional_db):
    assert logged_in(people["requester"]).get("/api/executions/RUN_9999/model-calls").status_code == 404
    assert Client().get("/api/executions/RUN_0001/model-calls").status_code == 401


def test_the_execution_page_shows_each_prompt_and_response(analyzed, people):
    page = logged_in(people["requester"]).get(f"/executions/{analyzed.ref}/").content.decode()
    call = ModelCall.objects.get(execution=analyzed)
    assert 'id="model-calls-card"' in page and call.key in page
    assert "MUST: Use only figures from retail_snapshot_v1" in page  # the prompt, from the notes
    response_start = call.response["text"][:60].replace("'", "&#x27;")
    assert response_start in page


def test_the_support_agent_starts_from_the_dashboard_form(people, transactional_db):
    client = logged_in(people["requester"])
    bad = client.post("/executions/start/", {"workflow": "support_agent", "ticket": "TCK-0000"}, follow=True)
    assert "Could not start" in bad.content.decode() and "TCK-1001" in bad.content.decode()
    good = client.post("/executions/start/", {"workflow": "support_agent", "ticket": "TCK-1002"})
    assert good.status_code == 302
    page = client.get("/").content.decode()
    assert 'id="start-support-agent"' in page


# --- pure parts


def _tool(name: str):
    return next(t for t in support_agent.TOOLS if t.name == name)


TICKET = {"order_id": "ORD-1003", "sku": "SKU-GLS-20", "quantity": 3, "customer": {"email": "c@example.com"}}
PROGRESS = Progress(
    input={"ticket": "TCK-1003"},
    results={
        "get_ticket": TICKET,
        "lookup_order": {"items": [{"sku": "SKU-GLS-20", "qty": 2}]},
        "check_stock": {"available": 10},
    },
)


@pytest.mark.parametrize(
    "raw, problem",
    [
        (None, "not a JSON object"),
        ({"original_order": "ORD-1003", "sku": "SKU-GLS-20"}, "quantity: Field required"),
        ({"original_order": "ORD-1003", "sku": "SKU-GLS-20", "quantity": "2"}, "quantity: Input should be a valid"),
        ({"original_order": "ORD-1003", "sku": "SKU-GLS-20", "quantity": 0}, "greater than or equal to 1"),
        ({"original_order": "ORD-1003", "sku": "SKU-GLS-20", "quantity": 1, "price": 0}, "price: Extra inputs"),
        ({"original_order": "ORD-1001", "sku": "SKU-GLS-20", "quantity": 1}, "original_order must be 'ORD-1003'"),
    ],
)
def test_malformed_or_foreign_arguments_are_refused(raw, problem):
    with pytest.raises(Refused, match=problem):
        _tool("submit_replacement").effective_args(raw, PROGRESS)


def test_the_quantity_is_clamped_to_what_was_ordered_and_is_in_stock():
    args = {"original_order": "ORD-1003", "sku": "SKU-GLS-20", "quantity": 3}
    assert _tool("submit_replacement").effective_args(args, PROGRESS)["quantity"] == 2
    short = Progress(input=PROGRESS.input, results={**PROGRESS.results, "check_stock": {"available": 1}})
    assert _tool("submit_replacement").effective_args(args, short)["quantity"] == 1
    empty = Progress(input=PROGRESS.input, results={**PROGRESS.results, "check_stock": {"available": 0}})
    with pytest.raises(Refused, match="nothing to send"):
        _tool("submit_replacement").effective_args(args, empty)


def test_tools_are_allowed_only_in_their_state():
    start = Progress(input={"ticket": "TCK-1003"}, results={})
    assert _tool("get_ticket").why_not(start) == ""
    assert _tool("submit_replacement").why_not(start) == "first lookup_order, check_stock"
    assert _tool("reply_to_customer").why_not(start)
    assert _tool("submit_replacement").why_not(PROGRESS) == ""
    assert _tool("get_ticket").why_not(PROGRESS) == "get_ticket is already done"


def _notes(**over):
    return {**notes.initial(goal="Resolve the ticket.", constraints=["Never send more than ordered."]), **over}


def test_the_context_drops_hypotheses_first_and_never_a_constraint_or_fact(settings):
    facts = [{"id": "F1", "statement": "Two sets were ordered.", "source": "order_service:ORD-1003"}]
    hypotheses = [{"text": "x" * 400, "source": f"RUN_0001:resolve:r1:c{n}"} for n in range(1, 4)]
    full = notes.render(_notes(facts=facts, hypotheses=hypotheses), budget_tokens=10_000)
    assert full.count("x" * 400) == 3
    trimmed = notes.render(_notes(facts=facts, hypotheses=hypotheses), budget_tokens=250)
    assert trimmed.count("x" * 400) == 1 and "c3" in trimmed  # the newest hypothesis stays longest
    assert "- MUST: Never send more than ordered." in trimmed
    assert "- [F1] Two sets were ordered. (source: order_service:ORD-1003)" in trimmed
    with pytest.raises(notes.OverBudget, match="context budget is 20") as stop:
        notes.render(_notes(facts=facts, hypotheses=hypotheses), budget_tokens=20)
    assert stop.value.code == "budget_exceeded"


def test_canonical_json_is_sorted_compact_utf8():
    assert canonical_json({"tool": "t", "args": {"b": 1, "a": "é"}}) == '{"args":{"a":"é","b":1},"tool":"t"}'.encode()


def test_the_offline_model_plays_the_support_agent_deterministically():
    request = ModelRequest(
        prompt_id="support-agent",
        prompt_version="v1",
        system="",
        messages=({"role": "user", "content": "Please resolve support ticket TCK-1001."},),
        tools=tuple(t.spec for t in support_agent.TOOLS[:1]),
        offline_policy=support_agent.offline_policy,
    )
    client = OfflineModelClient()
    first = client.complete(request, call_key="RUN_0001:resolve:r1:c1")
    again = client.complete(request, call_key="RUN_0001:resolve:r1:c1")
    assert first == again
    assert first.tool_calls == (ToolCall(id=first.tool_calls[0].id, name="get_ticket", args={"ticket": "TCK-1001"}),)


class _Garbage(BaseHTTPRequestHandler):
    """A provider that answers 200 with something that is not a completion."""

    def do_POST(self):  # the http.server API
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = self.server.body
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(params=[b'{"unexpected": "shape"}', b"<html>oops</html>"], ids=["wrong-shape", "not-json"])
def garbage_provider(request):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    server.body = request.param
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_provider_answering_garbage_is_a_step_failure_with_the_raw_answer(settings, garbage_provider, provider):
    from executions.agent.adapters import AnthropicClient, OpenAIClient
    from executions.errors import FailureKind, StepFailure

    settings.OPENAI_BASE_URL = f"{garbage_provider}/v1"
    settings.ANTHROPIC_BASE_URL = garbage_provider
    client = OpenAIClient() if provider == "openai" else AnthropicClient()
    request = ModelRequest(
        prompt_id="p", prompt_version="v1", system="s", messages=({"role": "user", "content": "hi"},)
    )
    with pytest.raises(StepFailure) as failed:
        client.complete(request, call_key="RUN_0001:s:r1:c1")
    assert failed.value.kind == FailureKind.TRANSIENT
    assert "unreadable" in failed.value.message
    if "not JSON" not in failed.value.message:
        assert "unexpected" in str(failed.value.evidence)  # the raw answer, kept
