"""``keel migrate`` and ``keel rollout``: versions in flight (docs/design.md §4; triage.migration,
triage.rollout) — the API's endpoints as commands, through the same services.

``keel migrate --workflow W --to N`` moves W's live executions (or those ``--id`` names)
to vN as the bulk operation does: a dry run lists which can move and why not the others
(their migration preview's blockers), then each that can is moved, one audited
transition each. ``--dry-run`` stops after the list. A blocker is accepted one execution
at a time: ``--id RUN_0042 --accept "SENTENCE"`` (as the preview says it). Each move
commits on its own with its ``via.cli`` marks, so a crash keeps the moves done. Exit 0 when
every execution named or found moved (or could, with ``--dry-run``), 1 when some
couldn't, 2 on bad input.
"""

from __future__ import annotations

from executions import catalogue
from executions.errors import InvalidInput
from executions.models import execution_for
from triage import bulk, migration, rollout

from .. import trace
from ..registry import Result, UsageError, command, positive
from .executions import execution_json


def _migrate_arguments(parser):
    parser.add_argument("--workflow", required=True, help="the workflow whose executions move")
    parser.add_argument("--to", type=positive, required=True, help="the version they move to")
    parser.add_argument("--id", action="append", dest="ids", metavar="ID", help="only this execution (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="list what would move and what blocks the rest")
    parser.add_argument("--reason", default="", help="why they move (required unless --dry-run)")
    parser.add_argument(
        "--accept", action="append", default=[], metavar="SENTENCE", help="with one --id: a blocker accepted by name"
    )


@command(
    "migrate",
    help="Move live executions to another version of their workflow (a dry run first)",
    arguments=_migrate_arguments,
    acts=True,
    per_item=True,
)
def migrate(args, user) -> Result:
    workflow, to, ids = args["workflow"], args["to"], args["ids"] or []
    if workflow not in catalogue.names():
        raise InvalidInput("--workflow", f"unknown workflow {workflow!r}; known: {', '.join(catalogue.names())}")
    migration.target(workflow, to, field_name="--to")
    for ref in ids:
        execution = execution_for(ref)  # NotFound: exit 2
        if execution.workflow != workflow:
            raise InvalidInput("--id", f"{execution.ref} is an execution of {execution.workflow}, not of {workflow}")
    if args["accept"]:
        if len(ids) != 1 or args["dry_run"]:
            raise UsageError(
                "--accept goes with exactly one --id, and not with --dry-run: accept what one preview says"
            )
        with trace.acting(user=user, command="migrate"):
            execution = migration.execution_migrate(
                ref=ids[0], user=user, to_version=to, reason=args["reason"], accept=args["accept"]
            )
        payload = execution_json(execution)
        return Result(payload, [f"{payload['id']} moved to v{to} ({payload['status']})"])
    dry = bulk.bulk_dry_run(
        user=user,
        operation="migrate",
        to_version=to,
        **({"ids": ids} if ids else {"filter": {"workflow": workflow}}),
    )
    lines = [f"{ref}  can move to v{to}" for ref in dry.eligible]
    lines += [f"{item.id}  stays: {item.why}" for item in dry.ineligible]
    if args["dry_run"] or not dry.eligible:
        lines.append(f"{len(dry.eligible)} can move, {len(dry.ineligible)} can't (dry run: nothing moved)")
        return Result(dry.as_dict(), lines, exit=1 if dry.ineligible else 0)
    if not args["reason"].strip():
        raise InvalidInput("--reason", "say why they move to another version")
    run = bulk.bulk_run(
        user=user,
        operation="migrate",
        ids=dry.eligible,
        reason=args["reason"],
        token=dry.token,
        to_version=to,
        each=lambda: trace.acting(user=user, command="migrate"),  # each move commits with its marks
    )
    lines = [f"{r.id}  {r.outcome}: {r.detail}" for r in run.results]
    lines += [f"{item.id}  stays: {item.why}" for item in dry.ineligible]
    moved = run.count("done")
    lines.append(f"{moved} moved to v{to} in {run.batch}, {len(run.results) - moved + len(dry.ineligible)} did not")
    answer = {**run.as_dict(), "ineligible": [{"id": i.id, "why": i.why} for i in dry.ineligible]}
    return Result(answer, lines, exit=0 if moved == len(run.results) and not dry.ineligible else 1)


def _rollout_arguments(parser):
    parser.add_argument("--workflow", required=True)
    parser.add_argument("--version", type=positive, required=True, help="the version new starts go to")
    parser.add_argument(
        "--percent", type=int, required=True, help="of the new starts without a version (0: back to the stable one)"
    )
    parser.add_argument("--reason", default="", help="why (required)")


@command(
    "rollout",
    help="Send a percentage of new starts to a version (refused to rise while replay finds drift on it)",
    arguments=_rollout_arguments,
    acts=True,
)
def rollout_(args, user) -> Result:
    item = rollout.workflow_rollout(
        name=args["workflow"], user=user, version=args["version"], percent=args["percent"], reason=args["reason"]
    )
    now = item["rollout"]
    return Result(
        item,
        [f"{item['name']}: {now['percent']}% of new starts to v{now['version']}, the rest to v{now['stable']}"],
    )
