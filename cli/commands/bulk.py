"""``keel bulk``: cancel, resume, retry, pause or migrate many executions (``POST
/api/executions/bulk``; the same body, ``triage.inputs.BulkIn``, the same service,
``triage.bulk``, and the same JSON). Operators.

Two steps, as the API's. ``--dry-run`` with ``--id``s or the list's filters (``--status``,
``--workflow``, ``--reason-code``) changes nothing: it prints which executions the
operation applies to now (the frozen set), why not the others, and the token that binds a
run to exactly that set, alone on the last line. A run then acts on that frozen set:

* ``--id`` each id of the set (``--token`` optional, as for an API client: given, the ids
  must be exactly the dry run's);
* or the dry run's own filters with ``--token``: the filter is looked at again and the run
  goes ahead only if it gives exactly the set the token names (``triage.bulk.check_token``),
  else nothing is done ("dry-run again"). A filter without a token is refused, as the API
  refuses a real run with a filter.

Each item commits on its own with its ``via.cli`` marks (``per_item``; the ``each`` of
``triage.bulk.bulk_run``, as ``keel migrate`` does), so a crash keeps what was done. Exit 0
when every item was done (a dry run: always, once it answered), 1 when some were skipped
or broke, 2 bad input, 4 not an operator.
"""

from __future__ import annotations

from executions import inputs
from executions.errors import InvalidInput
from executions.models import Status
from triage import bulk
from triage.api import BulkDryRunOut, BulkRunOut
from triage.inputs import BulkIn

from .. import trace
from ..registry import Result, api_json, command


def _arguments(parser) -> None:
    parser.add_argument("operation", help="cancel, resume, retry, pause or migrate (with --to-version)")
    parser.add_argument("--id", action="append", dest="ids", metavar="ID", help="this execution (repeatable)")
    parser.add_argument("--status", help=f"the list's filter: one of {', '.join(Status.values)}")
    parser.add_argument("--workflow", help="the list's filter: executions of this workflow")
    parser.add_argument("--reason-code", metavar="R", help="the list's filter: stuck for this reason")
    parser.add_argument("--reason", default="", help="why (required for a run; recorded on each item)")
    parser.add_argument("--dry-run", action="store_true", help="list the frozen set and its token, change nothing")
    parser.add_argument("--token", metavar="T", help="the dry run's token: act on exactly its set")
    parser.add_argument("--to-version", type=int, metavar="N", help="migrate: the version they move to")


def _body(args) -> BulkIn:
    given = {"status": args["status"], "workflow": args["workflow"], "reason": args["reason_code"]}
    filters = {name: value for name, value in given.items() if value is not None}
    return inputs.parse(
        BulkIn,
        {
            "operation": args["operation"],
            "ids": args["ids"] or None,
            "filter": filters or None,
            "reason": args["reason"],
            "dry_run": args["dry_run"],
            "token": args["token"],
            "to_version": args["to_version"],
        },
    )


@command(
    "bulk",
    help="Cancel, resume, retry, pause or migrate many executions: a dry run (its frozen set and token), then a run",
    arguments=_arguments,
    acts=True,
    per_item=True,  # each item commits with its marks (triage.bulk.bulk_run's each)
)
def bulk_(args, user) -> Result:
    body = _body(args)
    filters = body.filter.model_dump() if body.filter is not None else None
    if body.dry_run:
        dry = bulk.bulk_dry_run(
            user=user, operation=body.operation, ids=body.ids, filter=filters, to_version=body.to_version
        )
        lines = [f"{ref}  {body.operation}: eligible" + _note(dry.notes.get(ref)) for ref in dry.eligible]
        lines += [f"{item.id}  not: {item.why}" for item in dry.ineligible]
        more = " (more matched: narrow the filter)" if dry.truncated else ""
        lines.append(f"{len(dry.eligible)} eligible, {len(dry.ineligible)} not{more} (dry run: nothing done); token:")
        lines.append(dry.token)
        return Result(api_json(BulkDryRunOut, dry.as_dict()), lines)
    if body.ids is not None and filters is not None:
        raise InvalidInput("ids", "give either ids or a filter")
    if filters is not None:
        if not body.token:
            raise InvalidInput(
                "filter",
                "a real run takes the ids a dry run returned, not a filter (or the same filter with the dry run's --token)",
            )
        # The filter's set now; bulk_run runs it only if it is exactly the one the token names.
        ids = bulk.bulk_dry_run(
            user=user, operation=body.operation, filter=filters, to_version=body.to_version
        ).eligible
        if not ids:
            raise InvalidInput("token", "the filter gives no eligible execution now, not the dry run's: dry-run again")
    elif body.ids is not None:
        ids = body.ids
    else:
        raise InvalidInput("ids", "name the executions (the eligible ids of a dry run)")
    run = bulk.bulk_run(
        user=user,
        operation=body.operation,
        ids=ids,
        reason=body.reason,
        token=body.token,
        to_version=body.to_version,
        each=lambda: trace.acting(user=user, command="bulk"),  # each item commits with its marks
    )
    lines = [f"{r.id}  {r.outcome}: {r.detail}" for r in run.results]
    done = run.count("done")
    lines.append(f"{done} done in {run.batch}, {len(run.results) - done} not")
    answer = api_json(BulkRunOut, run.as_dict())
    return Result(answer, lines, exit=0 if done == len(run.results) else 1)


def _note(note: str | None) -> str:
    return f" ({note})" if note else ""
