"""What the database can store, checked before anything is written.

PostgreSQL text and JSON can't hold NUL, psycopg can't send a lone surrogate, and our
integer columns stop at 2**31-1. ``text_refusal`` and ``json_refusal`` say why a value
can't be stored (the edge turns that into a 422 naming the field; a workflow's input
into InvalidInput); ``STORABLE`` is the same check as a pydantic validator (every body
and form field of text is ``Annotated[str, Field(max_length=…), STORABLE]``),
``storable_json`` for JSON.
``clip_text`` and ``clip_int`` shape values that must be *recorded* whatever they are
(a refused attempt's audit row): they never raise and always fit; ``scrubbed`` does the
same for JSON (a provider's answer). ``jsonable`` turns what a step or a provider answers
into the JSON that is stored and read back. A leaf: it imports
nothing of the project (Django's JSON encoder only), so every room may use it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from pydantic import AfterValidator

DB_INT_MAX = 2**31 - 1  # PostgreSQL integer; PositiveIntegerField is one


def text_refusal(value: str) -> str | None:
    """Why ``value`` can't be stored as text (None: it can)."""
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must not contain lone surrogates (not valid Unicode text)"
    return None


def json_refusal(value: Any) -> str | None:
    """Why the JSON value ``value`` can't be stored (None: it can): every key and string
    is safe text and every number finite. Iterative, so depth can't exhaust the stack."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            reason = text_refusal(item)
            if reason:
                return f"{path or 'value'}: {reason}"
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{path or 'value'}: must be a finite number"
        elif isinstance(item, dict):
            for key, child in item.items():
                reason = text_refusal(str(key))
                if reason:
                    return f"{path or 'value'}: a key {reason}"
                stack.append((f"{path}.{key}" if path else str(key), child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
    return None


class _Json(DjangoJSONEncoder):
    """What DjangoJSONEncoder writes (dates and times as ISO 8601, decimals and UUIDs as
    text), a pydantic model's JSON dump, a dataclass's fields, a set or tuple as a list,
    bytes as UTF-8 text."""

    def default(self, o: Any) -> Any:
        if hasattr(o, "model_dump") and callable(o.model_dump):
            return o.model_dump(mode="json")
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            return dataclasses.asdict(o)
        if isinstance(o, set | frozenset):
            try:
                return sorted(o)  # the same order in every process (a set's isn't)
            except TypeError:
                return list(o)
        if isinstance(o, tuple):
            return list(o)
        if isinstance(o, bytes | bytearray):
            return bytes(o).decode("utf-8", "replace")
        return super().default(o)


def jsonable(value: Any, *, distinct_keys: bool = True) -> Any:
    """``value`` as the JSON the database keeps and a later read returns (``_Json``'s
    conversions; keys as text), or TypeError saying why it is no JSON: two keys of one
    object that become the same text (``1`` and ``"1"``) are refused, not one of them
    silently dropped — unless ``distinct_keys`` is False (what must be kept whatever it
    is: a provider's answer keeps the last of them, as JSON would)."""
    try:
        return json.loads(json.dumps(value, cls=_Json), object_pairs_hook=_distinct_keys if distinct_keys else None)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(str(exc) or type(exc).__name__) from None


def _distinct_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise TypeError(f"two keys of one object are both {key!r} as text (e.g. 1 and '1')")
        seen.add(key)
    return dict(pairs)


def as_stored(value: Any, what: str, *, convert: bool = True) -> Any:
    """``value`` as it is stored and read back (``jsonable``; with ``convert=False`` only
    plain JSON is accepted, as it is), or TypeError naming ``what``: "<what> is not JSON:
    …" or "<what> can't be stored: …" (a bug in the code that made it)."""
    try:
        stored = jsonable(value) if convert else json.loads(json.dumps(value), object_pairs_hook=_distinct_keys)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(f"{what} is not JSON: {exc or type(exc).__name__}") from None
    reason = json_refusal(stored)
    if reason:
        raise TypeError(f"{what} can't be stored: {reason}")
    return stored


def scrubbed(value: Any) -> Any:
    """JSON ``value`` with what the database can't hold replaced, for what must be kept
    whatever it is (a provider's answer): NUL and lone surrogates in any key or string
    become U+FFFD, a non-finite number its text ("nan", "inf"). Unchanged when storable."""
    if json_refusal(value) is None:
        return value
    if isinstance(value, str):
        return "".join("\ufffd" if ch == "\x00" or "\ud800" <= ch <= "\udfff" else ch for ch in value)
    if isinstance(value, float):
        return str(value)
    if isinstance(value, dict):
        return {scrubbed(str(key)): scrubbed(child) for key, child in value.items()}
    if isinstance(value, list):
        return [scrubbed(child) for child in value]
    return value


def storable_text(value: str) -> str:
    """``value``, or ValueError saying why it can't be stored (a pydantic validator)."""
    reason = text_refusal(value)
    if reason:
        raise ValueError(reason)
    return value


def storable_json(value: Any) -> Any:
    """``value``, or ValueError saying why it can't be stored (a pydantic validator)."""
    reason = json_refusal(value)
    if reason:
        raise ValueError(reason)
    return value


# What makes a bounded string a storable one (a pydantic type's metadata): NUL and lone
# surrogates refused (``storable_text``). Every text field of an input reads
# ``Annotated[str, Field(min_length=…, max_length=…), STORABLE]``.
STORABLE = AfterValidator(storable_text)
# The same for any JSON a body carries (a signal's payload, an answer): ``Annotated[Any, STORABLE_JSON]``.
STORABLE_JSON = AfterValidator(storable_json)


def clip_text(value: Any, limit: int) -> str:
    """``value`` as text the database can hold: NUL dropped, surrogates replaced, at most ``limit``."""
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip_int(value: Any) -> int | None:
    """``value`` if it fits an integer column, else None (record the raw value as clipped text)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= DB_INT_MAX:
        return value
    return None
