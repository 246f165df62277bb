"""CSV cells a spreadsheet won't run as a formula (the audit exports; names, reasons and
comments are people's input).

A spreadsheet reads a cell as a formula when its first meaningful character is ``=``,
``+``, ``-`` or ``@`` — after leading whitespace, a byte-order mark or zero-width
characters, and in full-width form too (``＝``, ``＋``, ``－``, ``＠``), which some
spreadsheets fold to ASCII — or when it starts with a tab or a line break. Such a cell
is written with a leading ``'``, which every spreadsheet shows as text.
"""

from __future__ import annotations

import unicodedata

FORMULA_STARTS = frozenset("=+-@")
_INVISIBLE = "\ufeff\u200b\u200c\u200d\u2060\u00ad"


def safe_cell(value: object) -> str:
    """``value`` as CSV text, prefixed with ``'`` if a spreadsheet could run it."""
    text = "" if value is None else str(value)
    if text[:1] in ("\t", "\r", "\n"):
        return "'" + text
    head = text.lstrip().lstrip(_INVISIBLE).lstrip()
    head = unicodedata.normalize("NFKC", head[:1])[:1]  # ＝ → =
    return "'" + text if head in FORMULA_STARTS else text
