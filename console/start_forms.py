"""A start form drawn from a workflow's input schema (docs/design.md §6, "Platform"): one field per
property — text, number, checkbox, a select for an enum, a list editor (one item a line)
for a list of strings — with its constraints, its description as help text and its
example as placeholder beside a real label. Reading the form back gives the JSON input
the API would take; the workflow's own validation (the API's 422) decides the rest.

Pure: no request, no database. The views are ``console.start_views``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

TEXT, INTEGER, NUMBER, CHECKBOX, SELECT, LIST = "text", "integer", "number", "checkbox", "select", "list"

# What a person types as a number: ASCII digits with an optional sign (and, for a number, a
# decimal point and an exponent). Python's int() and float() also take "1_0", other scripts'
# digits ("٣") and, for float(), "nan" and "inf": a form takes none of them.
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
WHOLE_NUMBER = "a whole number: the digits 0-9, with an optional sign (e.g. 60)"
A_NUMBER = "a number: the digits 0-9, with an optional sign and decimal point (e.g. 2.5)"


def integer(text: str) -> int:
    """``text`` as an integer, or ValueError: ASCII digits with an optional sign, nothing else."""
    if not _INTEGER.fullmatch(text):
        raise ValueError(WHOLE_NUMBER)
    return int(text)


def number(text: str) -> float:
    """``text`` as a finite number, or ValueError: ASCII digits, an optional sign, decimal point
    and exponent, nothing else."""
    if not _NUMBER.fullmatch(text):
        raise ValueError(A_NUMBER)
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(A_NUMBER + ", not one this large")
    return value


@dataclass
class FormField:
    name: str
    label: str
    widget: str  # one of TEXT, INTEGER, NUMBER, CHECKBOX, SELECT, LIST
    required: bool
    help: str = ""
    placeholder: str = ""
    choices: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)  # min, max, minlength, maxlength, pattern
    value: Any = ""  # what the form shows (a list field: its lines)
    error: str = ""

    @property
    def id(self) -> str:
        return f"field-{self.name}"

    @property
    def lines(self) -> str:
        return "\n".join(self.value) if isinstance(self.value, list) else str(self.value or "")


def _resolve(schema: dict, root: dict) -> dict:
    """A property's schema with ``$ref`` followed and ``anyOf [X, null]`` (Optional) unwrapped."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = {**root.get("$defs", {}).get(name, {}), **{k: v for k, v in schema.items() if k != "$ref"}}
    options = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    if len(options) == 1:
        schema = {**_resolve(options[0], root), **{k: v for k, v in schema.items() if k != "anyOf"}}
    return schema


def fields(schema: dict[str, Any]) -> list[FormField]:
    """The form's fields, in the schema's order."""
    required = set(schema.get("required", []))
    drawn = []
    properties = schema.get("properties", {})
    # The workflow's own fields first; the ``constraints`` every input takes, last.
    ordered = sorted(properties.items(), key=lambda item: item[0] == "constraints")
    for name, raw in ordered:
        prop = _resolve(raw, schema)
        kind = prop.get("type")
        examples = prop.get("examples") or []
        f = FormField(
            name=name,
            label=prop.get("title") or name.replace("_", " ").capitalize(),
            widget=TEXT,
            required=name in required,
            help=prop.get("description", ""),
            placeholder=_shown(examples[0]) if examples else "",
        )
        default = prop.get("default")
        if "enum" in prop:
            f.widget, f.choices = SELECT, [str(c) for c in prop["enum"]]
        elif kind == "boolean":
            f.widget = CHECKBOX
        elif kind in ("integer", "number"):
            f.widget = INTEGER if kind == "integer" else NUMBER
            for key, attr in (("minimum", "min"), ("maximum", "max")):
                if key in prop:
                    f.attrs[attr] = prop[key]
        elif kind == "array":
            f.widget = LIST
            items = prop.get("items", {})
            most, longest = prop.get("maxItems"), items.get("maxLength")
            f.attrs = {"maxItems": most} if most else {}
            limits = [f"at most {most}" if most else "", f"each at most {longest} characters" if longest else ""]
            f.help = " — ".join(filter(None, [f.help, ", ".join(filter(None, ["one a line", *limits]))]))
        else:
            for key, attr in (("minLength", "minlength"), ("maxLength", "maxlength"), ("pattern", "pattern")):
                if key in prop:
                    f.attrs[attr] = prop[key]
        if default is not None:
            f.value = default if f.widget in (LIST, CHECKBOX) else _shown(default)
        drawn.append(f)
    return drawn


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def read(drawn: list[FormField], post) -> tuple[dict[str, Any], dict[str, str]]:
    """The input the form says (as the API would take it), and the errors of values that
    aren't even of their type (a number that isn't one: ``integer``, ``number``). Each field
    keeps what was typed."""
    data: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for f in drawn:
        if f.widget == CHECKBOX:
            f.value = post.get(f.name) in ("on", "true", "1")
            data[f.name] = f.value
            continue
        if f.widget == LIST:
            f.value = [line.strip() for line in post.get(f.name, "").splitlines() if line.strip()]
            if f.value or f.required:
                data[f.name] = f.value
            continue
        text = post.get(f.name, "").strip()
        f.value = text
        if not text:
            if f.required:
                errors[f.name] = "required" + (f", e.g. {f.placeholder}" if f.placeholder else "")
            continue
        if f.widget in (INTEGER, NUMBER):
            try:
                data[f.name] = integer(text) if f.widget == INTEGER else number(text)
            except ValueError as refused:
                errors[f.name] = str(refused)
            continue
        data[f.name] = text
    return data, errors


def place(
    refused: list[tuple[str, str]], drawn: list[FormField], *, budget_field: str
) -> tuple[dict[str, str], str, list[str]]:
    """Where each refusal ``(field, reason)`` of a start goes: beside its form field (a
    field refused more than once says each reason), beside the budget, or above the form
    (a refusal no field of the form holds, said with its field's name)."""
    names = {f.name for f in drawn}
    beside: dict[str, list[str]] = {}
    budget: list[str] = []
    elsewhere: list[str] = []
    for path, reason in refused:
        name = field_of(path)
        if path == budget_field:
            budget.append(reason)
        elif name in names:
            beside.setdefault(name, []).append(reason)
        else:
            elsewhere.append(f"{path}: {reason}")
    return {name: "; ".join(reasons) for name, reasons in beside.items()}, "; ".join(budget), elsewhere


def field_of(path: str) -> str:
    """The form field an InvalidInput's field names: ``input.constraints.3`` → ``constraints``."""
    parts = path.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "input" else ""
