"""S59 and the rest of "seen from the team's own tools" (docs/design.md §6, Observability) on
real processes: keel's web server and workers export their spans over OTLP/HTTP to a local
receiver that decodes the protobuf, and their errors to a local endpoint that reads
Sentry's envelopes (tests/support/receivers.py). Nothing of OpenTelemetry or Sentry is
mocked: the SDKs run in keel's processes and send over the network."""

from __future__ import annotations

import json
import os
import secrets
from collections import Counter
from pathlib import Path

import pytest

from executions.models import StepRun
from tests.support.agents import model_env, start_ticket
from tests.support.procs import wait_for
from tests.support.receivers import OtlpReceiver, SentryReceiver
from tests.support.stack import pk, wait_status

TOKEN = "metrics-" + secrets.token_hex(16)  # a configured secret (RUNTIME_METRICS_TOKEN)


@pytest.fixture
def collector():
    receiver = OtlpReceiver()
    yield receiver
    receiver.close()


def traced(collector: OtlpReceiver, **more: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_SERVICE_NAME": "keel-test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # export within 0.1 s (the SDK's default is 5 s)
        **more,
    }


def spans_of(collector: OtlpReceiver, trace_id: str, name: str, **attrs) -> list[dict]:
    return [
        s
        for s in collector.of_trace(trace_id)
        if s["name"] == name and all(s["attributes"].get(k) == v for k, v in attrs.items())
    ]


@pytest.mark.own_stack
def test_s59_one_trace_for_an_execution_killed_mid_run_and_resumed(stack, people, api_as, collector):
    """S59: SIGKILL the worker mid-run, then resume: one trace; no completed step exported twice."""
    env = traced(collector, KEEL_LOG_FORMAT="json")
    doomed = stack.up(
        workers=("doomed",), worker_env={"RUNTIME_FAILPOINTS": "before_step:draft_report=pause"}, **env
    ).worker
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    started = requester.start()
    ref, trace_id = started["id"], started["trace_id"]
    assert len(trace_id) == 32 and int(trace_id, 16)

    wait_for(lambda: stack.failpoint_reached("before_step:draft_report"), what="the worker to finish analyze")
    wait_for(
        lambda: spans_of(collector, trace_id, "keel.step", **{"keel.step": "analyze"}),
        what="analyze's span to be exported before the crash",
    )
    before_crash = {s["span_id"] for s in collector.of_trace(trace_id)}
    doomed.kill()  # SIGKILL after analyze was checkpointed and exported, before draft_report

    stack.worker("survivor", **env)
    waiting = wait_status(requester, ref, "awaiting_approval")
    assert manager.decide(ref, waiting["pending_approval"]).status_code == 202
    done = wait_status(requester, ref, "completed")
    assert done["trace_id"] == trace_id  # the same in every read, before and after the crash
    wait_for(lambda: spans_of(collector, trace_id, "keel.execution"), what="the root span at the end")

    spans = collector.of_trace(trace_id)
    if dump := os.environ.get("KEEL_TRACE_DUMP"):  # scripts/trace_waterfall.py draws docs/screenshots/trace.png
        Path(dump).write_text(json.dumps(spans + [s for s in collector.spans if s["trace_id"] != trace_id]))
    [root] = spans_of(collector, trace_id, "keel.execution")
    assert root["parent"] == "" and root["attributes"]["keel.status"] == "completed"
    assert root["attributes"]["keel.execution.id"] == ref and root["service"] == "keel-test"
    # Every span of the execution is in its trace, under its root (directly or through a step).
    by_id = {s["span_id"]: s for s in spans}
    for span in spans:
        if span is root:
            continue
        assert span["parent"] == root["span_id"] or span["parent"] in by_id, span["name"]
    # No completed step exported twice: one succeeded span per step visit, and as many as the runs.
    steps = [s for s in spans if s["name"] == "keel.step"]
    succeeded = Counter(
        (s["attributes"]["keel.step"], s["attributes"]["keel.visit"])
        for s in steps
        if s["attributes"]["keel.outcome"] == "succeeded"
    )
    assert set(succeeded.values()) == {1}, succeeded
    runs = StepRun.objects.filter(execution_id=pk(ref), outcome="succeeded")
    assert sorted(name for name, _ in succeeded) == sorted(runs.values_list("step", flat=True))
    analyze = [s for s in steps if s["attributes"]["keel.step"] == "analyze"]
    assert len(analyze) == 1 and analyze[0]["span_id"] in before_crash  # exported once, by the killed worker
    draft = [s for s in steps if s["attributes"]["keel.step"] == "draft_report"]
    assert draft and all(s["span_id"] not in before_crash for s in draft)  # by the survivor
    # The approval gate opened (waiting), then passed once the manager approved.
    gate = [s for s in steps if s["attributes"]["keel.step"] == waiting["pending_gate"]["step"]]
    assert [s["attributes"]["keel.outcome"] for s in gate] == ["waiting", "succeeded"]
    assert "gate.opened" in gate[0]["events"] and "gate.passed" in gate[1]["events"]
    # The model call under analyze's span, with the GenAI conventions; no prompt without the opt-in.
    [chat] = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert chat["parent"] == analyze[0]["span_id"]
    assert chat["attributes"]["gen_ai.request.model"] == "offline-deterministic-1"
    assert chat["attributes"]["gen_ai.usage.input_tokens"] > 0
    assert "gen_ai.input.messages" not in chat["attributes"]
    # The effect, by its ledger key.
    [publish] = [a for a in done["actions"] if a["type"] == "publish_report"]
    [effect] = spans_of(collector, trace_id, "keel.effect", **{"keel.action.key": publish["key"]})
    assert effect["attributes"]["keel.action.status"] == "succeeded"
    # The web requests that started and decided it, linked both ways with the execution's trace.
    for name in ("keel.start", "keel.decision"):
        [mark] = spans_of(collector, trace_id, name)
        [(request_trace, request_span)] = mark["links"]
        [request] = [s for s in collector.spans if s["span_id"] == request_span]
        assert request_trace != trace_id and request["attributes"]["http.method"] == "POST"
        assert request["attributes"]["http.route"].startswith("api/executions")
        assert (trace_id, mark["span_id"]) in request["links"]
    # The log lines of the slices name the trace, and the span they were written in.
    lines = [json.loads(line) for line in stack.logs().splitlines() if line.startswith("{")]
    mine = [line for line in lines if line.get("execution") == ref]
    assert mine and all(line["trace_id"] == trace_id for line in mine)
    in_spans = {line["span_id"] for line in mine if "span_id" in line}
    assert in_spans and in_spans <= {s["span_id"] for s in spans}
    # A person's act on it, a span of its trace too: the approval let it go on.
    [moved] = spans_of(collector, trace_id, "keel.transition", **{"keel.actor": "manager"})
    assert moved["attributes"]["keel.to"] == "running" and moved["links"]


def test_an_agent_through_the_openai_sdk_traces_its_model_and_tool_calls(stack, people, api_as, collector):
    """The support agent on the real OpenAI SDK against the sandbox's Chat Completions: each
    model call a ``chat`` span with the GenAI attributes (and, with ``KEEL_TRACE_CONTENT=on``,
    the prompt, never the key), each tool call an ``execute_tool`` span under its step; the
    call that waits for a manager's approval is no error."""
    env = model_env(stack, "openai")
    stack.up(**traced(collector, KEEL_TRACE_CONTENT="on"), **env)
    requester = api_as(people["requester"])
    ref = start_ticket(requester)
    waiting = wait_status(requester, ref, "awaiting_approval")
    trace_id = waiting["trace_id"]
    model = env["RUNTIME_MODEL"]
    wait_for(lambda: spans_of(collector, trace_id, "execute_tool submit_replacement"), what="the parked call's span")
    chats = spans_of(collector, trace_id, f"chat {model}")
    assert chats and all(c["attributes"]["gen_ai.operation.name"] == "chat" for c in chats)
    for chat in chats:
        attrs = chat["attributes"]
        assert attrs["gen_ai.provider.name"] == "openai" and attrs["gen_ai.request.model"] == model
        assert attrs["gen_ai.response.model"] and attrs["gen_ai.usage.input_tokens"] > 0
        assert attrs["keel.model_call.key"].startswith(f"{ref}:")
        assert "messages" in json.loads(attrs["gen_ai.input.messages"])  # the opt-in
    tools = [s for s in collector.of_trace(trace_id) if s["name"].startswith("execute_tool ")]
    names = {s["attributes"]["gen_ai.tool.name"] for s in tools}
    assert {"lookup_order", "submit_replacement"} <= names, names

    # Each under the step that made it: a step's span ends after its tools' and is exported
    # in a later batch, so wait for every parent to arrive.
    def with_parents() -> dict | None:
        found = {s["span_id"]: s for s in spans_of(collector, trace_id, "keel.step")}
        return found if all(s["parent"] in found for s in tools) else None

    steps = wait_for(with_parents, what="the step spans the tool spans belong to")
    [parked] = spans_of(collector, trace_id, "execute_tool submit_replacement")
    assert parked["status"] != 2  # STATUS_CODE_ERROR: waiting for a person is no failure
    assert steps[parked["parent"]]["attributes"]["keel.outcome"] in ("parked", "waiting")
    # The approvers' e-mails, sent beside the steps through the ledger, are effects of its trace too.
    told = wait_for(
        lambda: spans_of(collector, trace_id, "keel.effect", **{"keel.action.type": "notify_approver"}),
        what="an approver's e-mail span",
    )
    assert told[0]["attributes"]["keel.action.status"] == "succeeded"
    assert env["OPENAI_API_KEY"] not in json.dumps(collector.spans)


def test_an_error_in_a_step_reaches_sentry_tagged_with_the_secret_redacted(stack, people, api_as):
    """A step that raises: the error reaches the Sentry receiver with the execution, the
    workflow and the step as tags, and the configured secret in its message replaced."""
    sentry = SentryReceiver()
    try:
        stack.up(SENTRY_DSN=sentry.dsn, RUNTIME_METRICS_TOKEN=TOKEN, KEEL_WORKFLOW_MODULES="tests.support.failing_flow")
        requester = api_as(people["requester"])
        started = requester.post("/executions", {"workflow": "failing_step", "input": {}}).json()
        ref = started["id"]
        wait_status(requester, ref, "needs_attention")
        wait_for(
            lambda: [e for e in sentry.events if e.get("tags", {}).get("execution") == ref],
            what="the error at the Sentry receiver",
        )
        [event] = [e for e in sentry.events if e.get("tags", {}).get("execution") == ref]
        assert event["tags"]["workflow"] == "failing_step" and event["tags"]["step"] == "connect"
        assert event["tags"]["trace_id"] == started["trace_id"]  # the error leads to its trace
        sent = json.dumps(sentry.events)
        assert "ConnectionError" in sent and "the upstream refused" in sent
        assert TOKEN not in sent and "[redacted: RUNTIME_METRICS_TOKEN]" in sent
        assert not event.get("user")  # send_default_pii off: no user, no address
        frames = [
            f
            for e in sentry.events
            for x in e.get("exception", {}).get("values", [])
            for f in x["stacktrace"]["frames"]
        ]
        assert frames and not any("vars" in f for f in frames)  # no frame's variables (prompts, customers' data)
    finally:
        sentry.close()


def test_a_collector_that_stops_answering_mid_run_slows_no_step(stack, people, api_as, collector):
    """The collector answers, then mid-run accepts connections and never answers, then is
    gone: every step takes as long as it would without tracing, and the execution completes
    (the exporter is batched and bounded; what it can't send is dropped)."""
    stack.up(**traced(collector, OTEL_EXPORTER_OTLP_TIMEOUT="20"))
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    started = requester.start()
    ref = started["id"]
    wait_for(lambda: collector.of_trace(started["trace_id"]), what="the first spans")
    collector.hang = True  # stuck: each export waits for an answer that never comes
    waiting = wait_status(requester, ref, "awaiting_approval")
    collector.stop()  # gone: connection refused
    assert manager.decide(ref, waiting["pending_approval"]).status_code == 202
    wait_status(requester, ref, "completed")
    for run in StepRun.objects.filter(execution_id=pk(ref)):
        assert (run.finished_at - run.started_at).total_seconds() < 5, run.step
