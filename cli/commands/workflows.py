"""``keel workflows``: what can be started, with each version's steps, its live executions (a
version with none can be retired) and its rollout — the catalogue ``GET /api/workflows``
answers (executions.catalogue). ``keel workflow pause|resume NAME``: the workflow's kill
switch (``POST /api/workflows/{name}/pause|resume``; the same body, service and JSON: the
catalogue item)."""

from __future__ import annotations

from executions import catalogue, inputs, pauses
from executions.answers import WorkflowOut

from ..registry import Result, api_json, command


def _line(item: dict) -> str:
    names = sorted(item["input_schema"].get("properties", {}), key=lambda name: name == "constraints")  # theirs last
    required = item["input_schema"].get("required", [])
    fields = ", ".join(name + ("" if name in required else "?") for name in names)
    paused = " [paused]" if item["paused"] else ""
    # Each version with its live executions: one with none can be retired (docs/authoring.md).
    live = [f"v{v['version']}: {v['live']} live" for v in item["by_version"]]
    live += [f"v{v}: {n} live, not registered" for v, n in item["unregistered_live"].items()]
    rollout = item["rollout"]
    starts = (
        f"; new starts {rollout['percent']}% to v{rollout['version']}, the rest to v{rollout['stable']}"
        if rollout
        else ""
    )
    return (
        f"{item['name']} v{item['version']} (versions {', '.join(map(str, item['versions']))}){paused}: "
        f"{item['title']} — input {{{fields}}} — "
        + " → ".join(s["name"] for s in item["steps"])
        + f" — {', '.join(live)}{starts}"
    )


@command("workflows", help="The registered workflows: versions, input fields and steps (GET /api/workflows)")
def workflows(args) -> Result:
    items = catalogue.items()
    return Result({"items": items}, [_line(i) for i in items] or ["no workflows registered"])


def _switch_arguments(parser):
    parser.add_argument("name", help="the workflow's name (keel workflows lists them)")
    parser.add_argument("--reason", required=True, help="why (recorded with the switch)")


def _switched(switch):
    """``keel workflow pause|resume``: the body is ``{reason}``, the answer the catalogue item."""

    def act(args, user) -> Result:
        body = inputs.parse(inputs.ReasonIn, {"reason": args["reason"]})
        switch(name=args["name"], user=user, reason=body.reason)
        item = api_json(WorkflowOut, catalogue.item(args["name"]))
        return Result(item, [_line(item)])

    return act


command(
    "workflow pause",
    help="Pause a workflow (its kill switch): new executions stay pending, running ones pause at their next step (operators)",
    arguments=_switch_arguments,
    acts=True,
)(_switched(pauses.workflow_pause))
command(
    "workflow resume",
    help="Resume a paused workflow: what it paused goes on, the pending ones start (operators)",
    arguments=_switch_arguments,
    acts=True,
)(_switched(pauses.workflow_resume))
