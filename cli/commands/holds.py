"""``keel hold`` and ``keel unhold``: the legal hold (``POST`` and ``DELETE
/api/executions/{id}/hold``; auditors), through ``retention.holds`` — the same body, service
and JSON (the execution). Not ``keel pause``: a legal hold stops nothing, it keeps the
execution from being archived and purged whatever its age.

``DELETE …/hold`` takes no body, and releasing records no reason of its own (its event
carries the hold's reason): ``keel unhold`` takes none either.
"""

from __future__ import annotations

from executions import inputs
from retention import holds

from ..registry import Result, command
from .executions import _ref_argument, _summary, execution_json


def _hold_arguments(parser) -> None:
    _ref_argument(parser)
    parser.add_argument("--reason", required=True, help="why it must be kept (recorded with the hold)")


def _held(payload: dict) -> str:
    hold = payload.get("hold")
    if not hold:
        return f"{payload['id']}: no legal hold"
    return f"{payload['id']}: on legal hold since {hold['at']} by {hold['by']}: {hold['reason']}"


@command(
    "hold",
    help="Place a legal hold: the execution is never archived while it holds (auditors)",
    arguments=_hold_arguments,
    acts=True,
)
def hold(args, user) -> Result:
    body = inputs.parse(inputs.ReasonIn, {"reason": args["reason"]})
    payload = execution_json(holds.hold_place(ref=args["id"], user=user, reason=body.reason))
    return Result(payload, [_summary(payload), _held(payload)])


@command("unhold", help="Release a legal hold (auditors)", arguments=_ref_argument, acts=True)
def unhold(args, user) -> Result:
    payload = execution_json(holds.hold_release(ref=args["id"], user=user))
    return Result(payload, [_summary(payload), _held(payload)])
