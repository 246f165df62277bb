"""``keel workflows``: what can be started, with each version's steps, its live executions (a
version with none can be retired) and its rollout — the catalogue ``GET /api/workflows``
answers (executions.catalogue)."""

from __future__ import annotations

from executions import catalogue

from ..registry import Result, command


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
