"""``keel workflows``: what can be started, with each version's steps — the catalogue
``GET /api/workflows`` answers (executions.catalogue)."""

from __future__ import annotations

from executions import catalogue

from ..registry import Result, command


def _line(item: dict) -> str:
    names = sorted(item["input_schema"].get("properties", {}), key=lambda name: name == "constraints")  # theirs last
    required = item["input_schema"].get("required", [])
    fields = ", ".join(name + ("" if name in required else "?") for name in names)
    paused = " [paused]" if item["paused"] else ""
    return (
        f"{item['name']} v{item['version']} (versions {', '.join(map(str, item['versions']))}){paused}: "
        f"{item['title']} — input {{{fields}}} — " + " → ".join(s["name"] for s in item["steps"])
    )


@command("workflows", help="The registered workflows: versions, input fields and steps (GET /api/workflows)")
def workflows(args) -> Result:
    items = catalogue.items()
    return Result({"items": items}, [_line(i) for i in items] or ["no workflows registered"])
