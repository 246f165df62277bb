"""``keel replay``: which live executions would the code now installed stop? (docs/design.md §4
"Replay before deploy", §6; triage.replay). Exit 0 when nothing drifted, 1 when something
did, 2 on bad input. It calls nothing and writes nothing."""

from __future__ import annotations

from executions import catalogue
from executions.authoring import registry
from executions.errors import InvalidInput
from executions.models import TERMINAL
from executions.services import execution_for
from triage import replay as replaying

from ..registry import Result, UsageError, command, positive


def _arguments(parser):
    parser.add_argument("--id", action="append", dest="ids", metavar="ID", help="this execution (repeatable)")
    parser.add_argument("--workflow", help="only the executions of this workflow")
    parser.add_argument(
        "--version", type=positive, help="with --workflow: replay the executions pinned to other versions against vN"
    )


@command("replay", help="Replay live executions against the installed code; exit 1 on any drift", arguments=_arguments)
def replay(args) -> Result:
    ids, workflow, version = args["ids"] or [], args["workflow"], args["version"]
    if version is not None and not workflow:
        raise UsageError("--version needs --workflow: the version of which workflow?")
    if workflow and workflow not in catalogue.names():
        raise InvalidInput("--workflow", f"unknown workflow {workflow!r}; known: {', '.join(catalogue.names())}")
    if workflow and version is not None and version not in registry.versions(workflow):
        raise InvalidInput("--version", f"{workflow} has no v{version} (registered: {registry.versions(workflow)})")
    for ref in ids:
        execution = execution_for(ref)  # NotFound: exit 2
        if execution.status in TERMINAL:
            raise InvalidInput("--id", f"{execution.ref} is {execution.status}: only live executions are replayed")
    answer = replaying.replay(ids or None, workflow=workflow, against=version)
    lines = []
    for item in answer["items"]:
        said = f"{item['id']}  {item['workflow']} v{item['workflow_version']}  {item['verdict']}"
        lines += [said] + [_finding(f) for f in item["findings"]]
        lines += [f"  refused at {r['step'] or '—'}: {r['detail']}" for r in item.get("refused", [])]  # network
    lines.append(f"{answer['checked']} checked, {answer['drifted']} drifted")
    if workflow:  # retiring a version: none of its executions is live and no new start goes to it
        for v in catalogue.item(workflow)["by_version"]:
            if not v["live"] and not v["share"]:
                lines.append(f"{workflow} v{v['version']}: no live executions, no new starts: it can be unregistered")
    return Result(answer, lines, exit=1 if answer["drifted"] else 0)


def _finding(f: dict) -> str:
    """``  kind at step key: detail`` (no key where the finding has none, as a structure's)."""
    key = f" {f['key']}" if f["key"] else ""
    return f"  {f['kind']} at {f['step'] or '—'}{key}: {f['detail']}"
