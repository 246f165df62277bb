"""What of a secret is left in a text: any form a careless service echoes it in
(``sandbox/echo.py``: base64, percent-encoding, hex, reversed, halves…), or a run of half
of it or more anywhere. The tests' check that redaction left nothing."""

from __future__ import annotations

from sandbox.echo import encodings


def leaks(text: str, secret: str) -> list[str]:
    """The names of the forms of ``secret`` found in ``text`` (empty: nothing of it is left)."""
    found = [name for name, form in encodings(secret).items() if form in text]
    half = (len(secret) + 1) // 2
    found += [f"characters {i}–{i + half} of it" for i in range(len(secret) - half + 1) if secret[i : i + half] in text]
    return found
