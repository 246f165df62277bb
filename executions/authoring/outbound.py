"""Text the runtime sends to third parties (a customer, a partner) without asking a person.

The rule (docs/agents.md, "Injection rules"): an effect that sends text to a third party
either needs an approval of its exact content, or sends one of the fixed ``Template``s
it declares, whose free parts are bounded. Nothing a model, a requester or a signal
wrote reaches the third party verbatim otherwise:

- an agent tool marked ``third_party=True`` without ``approval`` must declare its
  ``templates``, and its arguments (what the model fills in) must be bounded: every
  string an enum, a constant, or a ``pattern`` of at most ``FREE_TEXT_CHARS``
  characters (``unbounded_text`` names the others; declaring such a tool fails);
- a workflow effect marked ``third_party=True`` that no gate guards must declare its
  ``templates`` too;
- a template is filled only by ``Template.fill``: each value one line of at most
  ``VALUE_CHARS`` printable characters, else the effect fails (invalid input) before
  anything is sent;
- the templates are shown to the approver on every approval page of the execution
  ("What this execution may send without asking again"), and what was sent is the
  action's arguments in the ledger.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

import pydantic

from ..errors import FailureKind, StepFailure

FREE_TEXT_CHARS = 64  # a model-filled string of a template-bound tool
VALUE_CHARS = 200  # one value filled into a template


@dataclass(frozen=True, kw_only=True)
class Template:
    """A fixed message with ``{placeholders}``; ``name`` says when it is sent."""

    name: str
    text: str

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(field for _, field, _, _ in string.Formatter().parse(self.text) if field)

    def fill(self, **values: Any) -> str:
        """The message with ``values``; StepFailure (invalid input, nothing sent) for a value
        that is not one short printable line, or a placeholder left without one."""
        missing = [name for name in self.placeholders if name not in values]
        if missing:
            raise StepFailure(FailureKind.INVALID_INPUT, f"template {self.name!r}: no value for {', '.join(missing)}")
        shown = {}
        for name, value in values.items():
            text = str(value)
            if len(text) > VALUE_CHARS or not text.isprintable():
                raise StepFailure(
                    FailureKind.INVALID_INPUT,
                    f"template {self.name!r}: {name} is not one printable line of at most {VALUE_CHARS} "
                    f"characters ({text[:40]!r}…); not sent",
                )
            shown[name] = text
        return self.text.format(**shown)


def unbounded_text(args: type[pydantic.BaseModel]) -> list[str]:
    """The string fields of ``args`` whose value is free text: not an enum or a constant,
    and not a ``pattern`` of at most FREE_TEXT_CHARS characters (nested objects and
    lists are followed)."""
    schema = args.model_json_schema()
    definitions = schema.get("$defs", {})
    found: list[str] = []

    def visit(node: dict[str, Any], path: str) -> None:
        if "$ref" in node:
            node = definitions.get(node["$ref"].rsplit("/", 1)[-1], {})
        for option in node.get("anyOf", []) + node.get("oneOf", []) + node.get("allOf", []):
            visit(option, path)
        kind = node.get("type")
        if kind == "string" and not ("enum" in node or "const" in node):
            if not ("pattern" in node and node.get("maxLength", FREE_TEXT_CHARS + 1) <= FREE_TEXT_CHARS):
                found.append(path)
        elif kind == "object" or "properties" in node:
            for name, child in node.get("properties", {}).items():
                visit(child, f"{path}.{name}" if path else name)
        elif kind == "array":
            visit(node.get("items", {}), f"{path}[]")

    visit(schema, "")
    return sorted(set(found))
