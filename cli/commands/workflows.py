"""``keel workflows``: what can be started, with each version's steps."""

from __future__ import annotations

from executions.authoring import registry

from ..registry import Result, command


def _item(name: str) -> dict:
    latest = registry.latest(name)
    return {
        "name": latest.name,
        "title": latest.title,
        "version": latest.version,
        "versions": registry.versions(name),
        "steps": [{"name": s.name, "label": s.label, "kind": str(s.kind)} for s in latest.steps],
    }


@command("workflows", help="The registered workflows, their versions and steps")
def workflows(args) -> Result:
    items = [_item(name) for name in registry.names()]
    lines = [
        f"{i['name']} v{i['version']} (versions {', '.join(map(str, i['versions']))}): {i['title']} — "
        + " → ".join(s["name"] for s in i["steps"])
        for i in items
    ]
    return Result({"items": items}, lines or ["no workflows registered"])
