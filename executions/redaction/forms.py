"""The forms a configured secret takes when something outside echoes it back encoded.

A provider may quote a key as it was sent, or encoded: a ``Basic`` header's base64, a
URL's percent-encoding, a debug dump in hex, the string reversed, or half of it.
``Forms`` holds, for one set of secrets, one compiled pattern that finds every one of
these, and says which secret each match is. Built once per set of secrets
(``executions.redaction`` caches it); a text with no match costs one failed search.

For each secret, the *whole* forms:

- the secret with any of its characters percent-encoded (``%2D`` or ``%2d``; a space
  also ``+``): verbatim, ``quote``'d, fully or partly encoded — one pattern for all;
- its base64 (its UTF-8 bytes), standard or URL-safe alphabet, padded or not, at each
  of the three byte alignments: only the characters the secret alone decides, so the
  secret inside a longer base64 string (``Basic`` credentials, a token, a data URL) is
  found wherever it starts;
- its UTF-8 bytes in hex, lower or upper case;
- the secret reversed;

and its *pieces*: every run of ``piece_length(n)`` of its characters (half the secret,
rounded up, never fewer than ``MIN_PIECE``: a shorter run of a short secret would match
ordinary words; a secret shorter than that has no pieces), each followed, once found,
as far as the text runs on along the secret — so a quoted half, a truncated key or a
key cut in two is replaced up to its end.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable

MIN_PIECE = 12  # the shortest run of a secret's characters that counts as a piece of it
# What the encoded forms are written with: percent-encoding, hex, both base64 alphabets.
_ALPHABET = "%+/_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def piece_length(length: int) -> int | None:
    """How many characters of a secret of ``length`` make a piece of it (None: none do)."""
    size = max(-(-length // 2), MIN_PIECE)
    return size if size < length else None


def _hex_digit(digit: int) -> str:
    char = "0123456789abcdef"[digit]
    return f"[{char}{char.upper()}]" if char.isalpha() else char


def _percent_or_plain(char: str) -> str:
    """``char`` as written or percent-encoded (its UTF-8 bytes, either case of hex)."""
    encoded = "".join(f"%{_hex_digit(byte >> 4)}{_hex_digit(byte & 15)}" for byte in char.encode())
    return "(?:" + "|".join([re.escape(char), encoded] + (["\\+"] if char == " " else [])) + ")"


def base64_cores(data: bytes) -> list[str]:
    """The base64 of ``data`` at each of the three byte alignments, only the characters
    ``data`` alone decides (none of the bits around it), standard alphabet, no padding."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data + b"\0\0\0").decode()
        first, last = -(-8 * offset // 6), 8 * (offset + len(data)) // 6
        cores.append(encoded[first:last])
    return cores


def _either_alphabet(core: str) -> str:
    """A base64 core as a pattern matching the standard and the URL-safe alphabet."""
    return "".join("[+-]" if c == "+" else "[/_]" if c == "/" else c for c in core)


def whole_forms(secret: str) -> list[str]:
    """The patterns of ``secret``'s whole forms (see the module docstring)."""
    data = secret.encode()
    return [
        "".join(_percent_or_plain(c) for c in secret),
        *(_either_alphabet(core) for core in base64_cores(data)),
        f"(?i:{data.hex()})",
        re.escape(secret[::-1]),
    ]


class Forms:
    """Every form of every secret in ``secrets`` ((name, value) pairs), in one pattern.

    ``sub(text, marker)`` replaces each form found with ``marker(name)``. The same value
    under two names is found under the first; a longer secret is tried before a shorter
    one it may contain, and whole forms before pieces."""

    def __init__(self, secrets: Iterable[tuple[str, str]]) -> None:
        named: dict[str, str] = {}
        for name, value in secrets:
            named.setdefault(value, name)
        ordered = sorted(named.items(), key=lambda item: len(item[0]), reverse=True)
        self._names: dict[str, str] = {}
        self._pieces: dict[str, list[tuple[str, str, int]]] = {}  # piece → (name, secret, offset)
        alternatives = []
        for n, (value, name) in enumerate(ordered):
            self._names[f"w{n}"] = name
            alternatives.append(f"(?P<w{n}>{'|'.join(whole_forms(value))})")
            size = piece_length(len(value)) or 0  # 0: no piece of it will do
            for offset in range(len(value) - size + 1) if size else ():
                self._pieces.setdefault(value[offset : offset + size], []).append((name, value, offset))
        if self._pieces:
            alternatives.append("(?P<piece>" + "|".join(re.escape(p) for p in sorted(self._pieces)) + ")")
        self.pattern = re.compile("|".join(alternatives)) if alternatives else None
        # Every character any form can hold, and the shortest form: the pattern is searched
        # only inside runs of those characters at least that long (words, ids, tokens), so
        # prose and JSON punctuation cost one pass of a character class.
        chars = set(_ALPHABET).union(*(value for value in named))
        shortest = min((piece_length(len(value)) or len(value) for value in named), default=0)
        self.runs = re.compile(f"[{''.join(re.escape(c) for c in sorted(chars))}]{{{shortest},}}")

    def sub(self, text: str, marker: Callable[[str], str]) -> str:
        if self.pattern is None:
            return text
        parts, at = [], 0
        for run in self.runs.finditer(text):
            start, stop = run.span()
            while (found := self.pattern.search(text, start, stop)) is not None:
                begin, end = found.span()
                if found.lastgroup == "piece":
                    name, end = self._run_on(text, found.group(), end, stop)
                else:
                    name = self._names[found.lastgroup or ""]
                parts += [text[at:begin], marker(name)]
                at = start = end
        if not parts:
            return text
        parts.append(text[at:])
        return "".join(parts)

    def _run_on(self, text: str, piece: str, end: int, stop: int) -> tuple[str, int]:
        """The piece's secret, and where the run of that secret's characters that starts
        with the piece ends in ``text`` (the longest, if the piece occurs in several)."""
        best: tuple[str, int] | None = None
        for name, value, offset in self._pieces[piece]:
            at, along = end, offset + len(piece)
            while at < stop and along < len(value) and text[at] == value[along]:
                at, along = at + 1, along + 1
            if best is None or at > best[1]:
                best = (name, at)
        assert best is not None  # every piece came from at least one secret
        return best
