"""What an execution is about, in a few words, from its input: the line the inbox, the
approval card and the approval mails show beside the run's id (issue 39, item 15: they
didn't name the report's month).

``about({"month": "2026-06", "constraints": […]})`` → ``"month 2026-06"``: the input's
scalar fields (text, numbers, booleans) in the input's order, ``name value`` each, a value
clipped to ``VALUE_CHARS`` and the line to ``LINE_CHARS`` characters; lists, objects and
nulls are left out. Whitespace (line breaks included) is folded to one space and control
characters dropped, so the line is safe in a mail's subject. Pure: no database.
"""

from __future__ import annotations

import unicodedata
from typing import Any

VALUE_CHARS = 40
LINE_CHARS = 100


def about(data: Any) -> str:
    """The input's scalar fields as one short line ("" when it has none)."""
    if not isinstance(data, dict):
        return ""
    parts = []
    for key, value in data.items():
        if isinstance(value, bool):
            shown = "yes" if value else "no"
        elif isinstance(value, int | float | str):
            shown = _clip(_plain(str(value)), VALUE_CHARS)
        else:
            continue
        name = _plain(str(key)).replace("_", " ")
        if name and shown:
            parts.append(f"{name} {shown}")
    return _clip(", ".join(parts), LINE_CHARS)


def _plain(text: str) -> str:
    """``text`` on one line: whitespace folded to one space, control and format characters dropped."""
    kept = "".join(" " if c.isspace() else c for c in text if c.isspace() or unicodedata.category(c)[0] != "C")
    return " ".join(kept.split())


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1].rstrip() + "…"
