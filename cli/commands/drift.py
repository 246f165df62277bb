"""``keel accept-request``: an execution stopped by a model drift goes on with the request its
step rebuilt (``POST /api/executions/{id}/accept-request``; the same body,
``triage.inputs.AcceptRequestIn``, the same service, ``triage.drift.execution_accept_request``,
the same JSON: the execution).

Without ``--key`` and ``--sha256`` it only shows the drift — the call's key, the recorded and
the rebuilt request's sha256 — and exits 2 saying what to give: what is accepted is the
request the operator saw, never whatever the step rebuilds next."""

from __future__ import annotations

from executions import inputs, services
from triage import drift
from triage.inputs import AcceptRequestIn

from ..registry import Result, UsageError, command
from .executions import _ref_argument, _summary, execution_json


def _arguments(parser) -> None:
    _ref_argument(parser)
    parser.add_argument("--key", help="the drifted model call's key, as this command shows it without one")
    parser.add_argument("--sha256", help="the rebuilt request's sha256, as shown: what you accept")
    parser.add_argument("--reason", required=True, help="why the new request is right (recorded in the audit)")


@command(
    "accept-request",
    help="Go on with the request a drifted model call's step rebuilt (operators); without --key/--sha256 shows it",
    arguments=_arguments,
    acts=True,
)
def accept_request(args, user) -> Result:
    if not args.get("key") or not args.get("sha256"):
        found = drift.drift_of(services.execution_for(args["id"]))
        if found is None:
            raise UsageError(f"{args['id']} is not stopped by a model drift: there is no request to accept")
        raise UsageError(
            f"{args['id']} stopped at {found.key} ({found.step}): recorded request {found.recorded_sha256}, "
            f"rebuilt {found.rebuilt_sha256}; to go on with the rebuilt one, give "
            f"--key {found.key} --sha256 {found.rebuilt_sha256}"
        )
    body = inputs.parse(
        AcceptRequestIn, {"key": args["key"], "request_sha256": args["sha256"], "reason": args["reason"]}
    )
    execution = drift.execution_accept_request(
        ref=args["id"], user=user, key=body.key, request_sha256=body.request_sha256, reason=body.reason
    )
    payload = execution_json(execution)
    return Result(payload, [_summary(payload), f"accepted the rebuilt request of {body.key}: it is asked again"])
