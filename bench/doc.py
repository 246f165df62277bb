"""docs/BENCHMARKS.md is written in sections, each owned by one script.

A section lives between ``<!-- begin NAME -->`` and ``<!-- end NAME -->``; writing it
replaces only that span (or appends it), so ``make bench`` and ``make bench-peers``
each refresh their own tables and leave the rest of the page alone.
"""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"
ORDER = ("keel", "metrics", "profile", "peers", "triage", "children", "retention", "partitions", "scale-out")


def write_section(name: str, text: str, *, doc: Path = DOC) -> None:
    block = f"<!-- begin {name} -->\n{text.strip()}\n<!-- end {name} -->"
    current = doc.read_text() if doc.exists() else ""
    pattern = re.compile(rf"<!-- begin {re.escape(name)} -->.*?<!-- end {re.escape(name)} -->", re.S)
    if pattern.search(current):
        updated = pattern.sub(lambda _: block, current)
    else:
        updated = _insert(current, name, block)
    doc.write_text(updated.rstrip() + "\n")


def _insert(current: str, name: str, block: str) -> str:
    """Place a new section before the first present section that comes after it in ORDER."""
    later = ORDER[ORDER.index(name) + 1 :] if name in ORDER else ()
    for other in later:
        marker = f"<!-- begin {other} -->"
        if marker in current:
            return current.replace(marker, f"{block}\n\n{marker}", 1)
    return f"{current.rstrip()}\n\n{block}\n" if current.strip() else f"{block}\n"
