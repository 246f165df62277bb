"""``keel resolve`` and ``keel close``: an operator's word on an action (``POST
/api/actions/{key}/resolve``, ``POST /api/actions/{key}/close``; the same bodies, services
and JSON, ``ActionDetailOut``).

``keel resolve KEY --outcome succeeded|failed --evidence TEXT [--receipt FIELD=VALUE …]``
establishes the outcome of an action the runtime could not (``unknown_outcome``):
succeeded goes on from the receipt (resuming the execution unless something else holds
it), failed fails the execution. ``keel close KEY …`` closes a planned compensation of a
cancelled execution (``compensation_pending``).
"""

from __future__ import annotations

from executions import inputs, services
from executions.answers import ActionDetailOut
from executions.models import Execution
from triage import compensations
from triage.inputs import CloseIn

from ..registry import Result, UsageError, api_json, command


def action_json(action) -> dict:
    """An action exactly as ``POST /api/actions/{key}/resolve`` answers it."""
    return api_json(ActionDetailOut, action)


def _receipt(given: list[str] | None) -> dict[str, str] | None:
    """``FIELD=VALUE`` options as the body's ``receipt`` object (None: no receipt)."""
    if not given:
        return None
    receipt: dict[str, str] = {}
    for item in given:
        name, equals, value = item.partition("=")
        if not equals or not name.strip():
            raise UsageError(f"--receipt {item!r} is not FIELD=VALUE (e.g. --receipt order_id=PO-1234)")
        if name.strip() in receipt:
            raise UsageError(f"--receipt names {name.strip()!r} twice")
        receipt[name.strip()] = value
    return receipt


def _outcome_arguments(parser, *, evidence: str) -> None:
    parser.add_argument("key", help="the action's key, as keel show lists it (e.g. RUN_0042:publish:v1)")
    parser.add_argument("--outcome", required=True, help="succeeded or failed")
    parser.add_argument("--evidence", required=True, help=evidence)


def _resolve_arguments(parser) -> None:
    _outcome_arguments(parser, evidence="how you established the outcome (recorded in the audit)")
    parser.add_argument(
        "--receipt",
        action="append",
        metavar="FIELD=VALUE",
        help="a receipt field the effect declares, with succeeded (repeatable)",
    )


@command(
    "resolve",
    help="Establish the outcome of an action whose outcome is unknown (operators)",
    arguments=_resolve_arguments,
    acts=True,
)
def resolve(args, user) -> Result:
    body = inputs.parse(
        inputs.ResolveIn,
        {"outcome": args["outcome"], "evidence": args["evidence"], "receipt": _receipt(args["receipt"])},
    )
    action = services.action_resolve(
        key=args["key"], user=user, outcome=body.outcome, evidence=body.evidence, receipt=body.receipt
    )
    answer = action_json(action)
    execution = Execution.objects.get(pk=action.execution_id)  # as the resolution left it
    return Result(answer, [f"{answer['key']}: {answer['status']}; {execution.ref} is now {execution.status}"])


def _close_arguments(parser) -> None:
    _outcome_arguments(parser, evidence="what was done at the provider, and how you know")


@command(
    "close",
    help="Close a planned compensation of a cancelled execution with evidence (operators)",
    arguments=_close_arguments,
    acts=True,
)
def close(args, user) -> Result:
    body = inputs.parse(CloseIn, {"outcome": args["outcome"], "evidence": args["evidence"]})
    action = compensations.action_close(key=args["key"], user=user, outcome=body.outcome, evidence=body.evidence)
    answer = action_json(action)
    return Result(answer, [f"{answer['key']}: closed as {answer['status']}"])
