"""JSON artifacts as a readable summary: one presenter per artifact kind, a generic one otherwise.

A presenter turns the parsed JSON of a version into a ``Summary`` (sections of labelled
fields and tables) that templates render; it never sees HTML. Workflows register the
presenter for the kinds they produce (``presenters.register("order", ...)``), so this
layer knows nothing about orders or reports. A presenter that fails on unexpected data
falls back to the generic summary: a summary is never the reason a page fails.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Field:
    label: str
    value: str


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[str]]
    numeric: frozenset[int] = frozenset()  # indexes of columns aligned right


@dataclass(frozen=True)
class Section:
    title: str
    fields: list[Field] = field(default_factory=list)
    table: Table | None = None


@dataclass(frozen=True)
class Summary:
    title: str
    sections: list[Section]
    note: str = ""  # e.g. why the generic summary was used


Presenter = Callable[[Any], Summary]

_presenters: dict[str, Presenter] = {}


def register(kind: str, presenter: Presenter) -> Presenter:
    """Use ``presenter`` for JSON artifacts of ``kind`` (``Artifact.kind``)."""
    existing = _presenters.get(kind)
    if existing is not None and existing is not presenter:
        raise ValueError(f"a presenter for {kind!r} artifacts is already registered")
    _presenters[kind] = presenter
    return presenter


def summary_for(kind: str, data: Any) -> Summary:
    """The kind's presenter, or the generic summary; never raises on odd data."""
    presenter = _presenters.get(kind)
    if presenter is None:
        return generic_summary(data)
    try:
        return presenter(data)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        log.warning("presenter for %s artifacts failed (%s); showing the generic summary", kind, exc)
        return generic_summary(data, note=f"Shown field by field: this {kind} doesn't have the expected shape.")


# --- The generic summary ----------------------------------------------------------


def label(key: str) -> str:
    """``shipping_address`` → ``Shipping address``."""
    text = str(key).replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def text(value: Any) -> str:
    """A scalar as a person reads it; anything nested as compact JSON."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list) and all(_is_scalar(v) for v in value):
        return ", ".join(text(v) for v in value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _is_record_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def records_table(records: list[dict[str, Any]]) -> Table:
    """Rows of objects as a table whose columns are their keys, in first-seen order."""
    columns: list[str] = []
    for record in records:
        columns += [k for k in record if k not in columns]
    numeric = frozenset(
        i for i, c in enumerate(columns) if all(isinstance(r.get(c), int | float) for r in records if c in r)
    )
    return Table(
        columns=[label(c) for c in columns],
        rows=[[text(r.get(c)) if c in r else "" for c in columns] for r in records],
        numeric=numeric,
    )


def generic_summary(data: Any, *, note: str = "") -> Summary:
    """Top-level scalars as fields; each nested object a section; each list of objects a table."""
    if not isinstance(data, dict):
        if _is_record_list(data):
            return Summary(title="Records", sections=[Section(title="Records", table=records_table(data))], note=note)
        return Summary(title="Value", sections=[Section(title="Value", fields=[Field("Value", text(data))])], note=note)
    top = Section(title="Fields", fields=[Field(label(k), text(v)) for k, v in data.items() if not _nested(v)])
    sections = [top] if top.fields else []
    for key, value in data.items():
        if isinstance(value, dict):
            sections.append(Section(title=label(key), fields=[Field(label(k), text(v)) for k, v in value.items()]))
        elif _is_record_list(value):
            sections.append(Section(title=label(key), table=records_table(value)))
    return Summary(title="Fields", sections=sections, note=note)


def _nested(value: Any) -> bool:
    return isinstance(value, dict) or _is_record_list(value)
