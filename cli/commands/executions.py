"""The commands on executions: start, list, show, cancel, resume, retry, signal — each the
API's endpoint as a command (the same body schema, the same service, the same JSON)."""

from __future__ import annotations

import json
import uuid

from executions import inputs, selectors, services, waits
from executions.answers import ExecutionOut
from executions.models import Status
from executions.reasons import StuckReason

from ..registry import Result, api_json, command, json_argument, positive


def execution_json(execution) -> dict:
    """An execution exactly as ``GET /api/executions/{id}`` answers it."""
    return api_json(ExecutionOut, selectors.execution_payload(execution))


def _summary(payload: dict) -> str:
    stuck = payload.get("stuck")
    why = f" — {stuck['reason']}: {stuck['detail']} (action: {stuck['action']})" if stuck else ""
    step = f" at {payload['current_step']}" if payload.get("current_step") else ""
    return f"{payload['id']}  {payload['workflow']} v{payload['workflow_version']}  {payload['status']}{step}{why}"


def _attempts(n: int) -> str:
    return "never sent" if n == 0 else f"{n} attempt{'s' if n != 1 else ''}"


def _at(moment) -> str:
    """A time of the API's payload as the dashboard writes it: ``2026-12-07 14:30:18 UTC``."""
    if moment is None:
        return "—"
    text = moment.isoformat() if hasattr(moment, "isoformat") else str(moment)
    return text[:19].replace("T", " ") + " UTC"


def _start_arguments(parser):
    parser.add_argument("workflow", help="the workflow's name (keel workflows lists them)")
    parser.add_argument("--input", default="{}", help='the input as JSON, e.g. \'{"month": "2026-08"}\'')
    parser.add_argument("--idempotency-key", help="the same key and input again start nothing new")
    parser.add_argument(
        "--budget-usd", type=float, help="a cost budget in US dollars (> 0, at most 1e6) for its model calls"
    )
    parser.add_argument("--version", type=int, help="a registered version to start (default: the latest)")


@command(
    "start", help="Start an execution; prints its id alone on the last line", arguments=_start_arguments, acts=True
)
def start(args, user) -> Result:
    body = inputs.parse(
        inputs.StartIn,
        {
            "workflow": args["workflow"],
            "input": json_argument(args["input"], field_name="input"),
            "idempotency_key": args["idempotency_key"],
            **({"budget_usd": args["budget_usd"]} if args.get("budget_usd") is not None else {}),
            **({"version": args["version"]} if args.get("version") is not None else {}),
        },
    )
    execution, created = services.execution_start(
        user=user,
        workflow=body.workflow,
        input=body.input,
        idempotency_key=body.idempotency_key,
        budget_usd=body.budget_usd,
        version=body.version,
    )
    payload = execution_json(execution)
    said = "started" if created else "already started with this idempotency key"
    return Result(payload, [f"{_summary(payload)} ({said})", payload["id"]])


def _list_arguments(parser):
    parser.add_argument("--status", choices=Status.values)
    parser.add_argument("--workflow")
    parser.add_argument("--reason", choices=StuckReason.values, help="why it is stuck")
    parser.add_argument("--input", help="a field of the input, KEY:VALUE (e.g. month:2026-06)")
    parser.add_argument("--limit", type=positive, default=50, help="at most this many (default 50)")


@command(
    "list",
    help="List executions, newest first (filters as the API's; --as: those that user may read)",
    arguments=_list_arguments,
    as_optional=True,
)
def list_(args, user=None) -> Result:  # --as USER: read through their access (keel.py looks as them)
    given = {k: args[k] for k in ("status", "workflow", "reason", "input") if args[k]}
    filters = inputs.parse(inputs.ListFilters, given)
    found, cursor = [], None
    while len(found) < args["limit"]:
        page, cursor = selectors.execution_page(
            status=filters.status, workflow=filters.workflow, reason=filters.reason, input=filters.input, cursor=cursor
        )
        found += page
        if cursor is None:
            break
    more = len(found) > args["limit"]
    found = found[: args["limit"]]
    items = [execution_json(e) for e in selectors.prefetch_payloads(found)]
    following = found[-1].ref if found and (more or cursor) else None
    return Result({"items": items, "next": following}, [_summary(item) for item in items] or ["no executions"])


def _ref_argument(parser):
    parser.add_argument("id", help="the execution's id, e.g. RUN_0042")


@command(
    "show",
    help="One execution, as GET /api/executions/{id} answers it (--as: as that user reads it)",
    arguments=_ref_argument,
    as_optional=True,
)
def show(args, user=None) -> Result:  # --as USER: one they may not read is "no execution" (exit 2)
    payload = execution_json(services.execution_for(args["id"]))
    lines = [
        _summary(payload),
        f"  step: {payload['step_label'] or '—'}",
        f"  status reason: {payload['status_reason'] or '—'}",
    ]
    if (gate := payload["pending_gate"]) and not payload["pending_approval"]:  # an approval: the line below
        until = f", until {_at(gate['until'])}" if gate["until"] else ""
        lines.append(f"  waiting for {gate['waiting_for']} at {gate['step']} since {_at(gate['since'])}{until}")
    if payload["pending_approval"]:
        a = payload["pending_approval"]
        lines.append(
            f"  awaiting approval #{a['id']}: {a['action']} of {a['artifact_id']} V{a['artifact_version']} ({a['content_sha256']})"
        )
    lines += [f"  action {a['key']}: {a['status']} ({_attempts(a['attempts'])})" for a in payload["actions"]]
    if payload["status"] == "completed":
        lines.append(f"  result: {json.dumps(payload['result'], ensure_ascii=False, default=str)}")
    return Result(payload, lines)


def _reason_arguments(parser):
    _ref_argument(parser)
    parser.add_argument("--reason", required=True, help="why (recorded in the audit)")


def _acted(run):
    """A command whose body is ``{reason}`` and whose answer is the execution."""

    def act(args, user) -> Result:
        body = inputs.parse(inputs.ReasonIn, {"reason": args["reason"]})
        payload = execution_json(run(ref=args["id"], user=user, reason=body.reason))
        return Result(payload, [_summary(payload)])

    return act


command("cancel", help="Cancel an execution (operators, and who started it)", arguments=_reason_arguments, acts=True)(
    _acted(services.execution_cancel)
)
command("resume", help="Resume an execution that needs attention (operators)", arguments=_reason_arguments, acts=True)(
    _acted(services.execution_resume)
)
command("retry", help="Run a retry_pending execution now (operators)", arguments=_reason_arguments, acts=True)(
    _acted(services.execution_retry_now)
)


def _signal_arguments(parser):
    _ref_argument(parser)
    parser.add_argument("name", help="the signal the execution waits for")
    parser.add_argument("--payload", help="the signal's payload as JSON (the wait's schema decides)")
    parser.add_argument("--event-id", help="makes a retry of this command harmless (default: a new one)")


@command("signal", help="Send a signal to a waiting execution", arguments=_signal_arguments, acts=True)
def signal(args, user) -> Result:
    body = inputs.parse(
        waits.SignalIn,
        {
            "name": args["name"],
            "payload": json_argument(args["payload"], field_name="payload"),
            "event_id": args["event_id"] or uuid.uuid4().hex,
        },
    )
    answer = waits.signal_deliver(
        ref=args["id"], user=user, name=body.name, payload=body.payload, event_id=body.event_id
    )
    return Result(
        answer, [f"{args['id']}: {body.name} delivered (event {answer['event_id']}); now {answer['execution_status']}"]
    )


def _budget_arguments(parser):
    _ref_argument(parser)
    parser.add_argument(
        "--add-usd", required=True, type=float, metavar="X", help="US dollars to add (> 0, at most 1e6)"
    )
    parser.add_argument("--reason", required=True, help="why (recorded in the audit)")


@command(
    "budget",
    help="Raise an execution's cost budget; a budget_exceeded one then goes on with resume (operators)",
    arguments=_budget_arguments,
    acts=True,
)
def budget(args, user) -> Result:
    body = inputs.parse(inputs.BudgetIn, {"add_usd": args["add_usd"], "reason": args["reason"]})
    payload = execution_json(
        services.execution_raise_budget(ref=args["id"], user=user, add_usd=body.add_usd, reason=body.reason)
    )
    return Result(payload, [_summary(payload), f"  budget: ${payload['cost']['budget_usd']}"])
