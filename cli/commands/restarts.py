"""``keel restart``: a failed execution runs again from a step, as a new execution that reuses
the recorded outputs of the steps before it (``POST /api/executions/{id}/restart``; the same
body, ``triage.inputs.RestartIn``, the same service, ``triage.restart.execution_restart``,
and the same JSON: the new execution). Its id alone on the last line, as ``keel start``'s."""

from __future__ import annotations

from executions import inputs
from executions.models import ref_for
from triage import restart as restarting
from triage.inputs import RestartIn

from ..registry import Result, command, positive
from .executions import _ref_argument, _summary, execution_json


def _arguments(parser) -> None:
    _ref_argument(parser)
    parser.add_argument("--from-step", required=True, metavar="STEP", help="the step it runs again from")
    parser.add_argument(
        "--visit", type=positive, metavar="N", help="which pass through the step (a loop's; default: the latest)"
    )
    parser.add_argument(
        "--accept-repeats", action="store_true", help="send again the effects that already happened (refused otherwise)"
    )
    parser.add_argument("--reason", required=True, help="why it should run again (recorded in the audit)")


@command(
    "restart",
    help="Run a failed execution again from a step, as a new execution; prints its id alone on the last line (operators)",
    arguments=_arguments,
    acts=True,
)
def restart(args, user) -> Result:
    body = inputs.parse(
        RestartIn,
        {
            "from_step": args["from_step"],
            "reason": args["reason"],
            "accept_repeats": args["accept_repeats"],
            **({"visit": args["visit"]} if args.get("visit") is not None else {}),
        },
    )
    execution = restarting.execution_restart(
        ref=args["id"],
        user=user,
        from_step=body.from_step,
        reason=body.reason,
        accept_repeats=body.accept_repeats,
        visit=body.visit,
    )
    payload = execution_json(execution)
    return Result(
        payload,
        [
            f"{_summary(payload)} (restarted from {ref_for(execution.restarted_from_id)} at {body.from_step})",
            payload["id"],
        ],
    )
