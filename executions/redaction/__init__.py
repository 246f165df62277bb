"""Redaction: no configured secret, and nothing shaped like a credential, is stored or
shown because something outside quoted it.

A provider or gateway that quotes the request in its error (``Authorization: Bearer
sk-…``), a receipt that echoes a header, a model that repeats what it was told: what
came from outside passes through ``redact`` *before* the runtime writes it anywhere —
the status reason, events, step runs, the ledger, the model-call journal, the logs —
so an append-only table never holds a key it can't forget. Where (docs/operations.md,
"What is redacted, and where"):

- ``StepFailure`` and ``NeedsAttention`` redact their message and evidence when made:
  every failure the runner records (reason, event, step run, action) goes through them;
- ``executions.authoring.http`` redacts every answer of an external service (receipts, tool
  results, error bodies); ``executions.agent.adapters`` the providers' errors and raw bodies;
- ``executions.engine.journal`` redacts a model's answer before anything reads it, and the
  stored copy of the request (its sha256 stays the hash of what was sent, so drift
  detection compares like with like); ``executions.engine.ledger`` a receipt, and
  ``executions.agent.steps`` a tool's result, whatever client produced them;
- ``RedactingFilter`` every log line (message, arguments and traceback) of the console
  handler (``settings.LOGGING``).

What is replaced:

1. every value of ``settings.SECRETS`` (the one list of configured secrets, kept where
   settings are read: provider keys, the metrics token, e-mail and webhook passwords,
   the passwords in the database and broker URLs…), in every form something outside
   may echo it back — verbatim, percent-encoded (fully or partly), base64 (either
   alphabet, any alignment, so inside a longer base64 string too), hex, reversed, or a
   piece of half of it or more (``executions.redaction.forms``) — by ``[redacted: NAME]``;
2. credential shapes, whoever's they are: an ``Authorization:`` / ``Proxy-Authorization:``
   / ``X-Api-Key:`` / ``Api-Key:`` header line's value, a ``Bearer …`` or ``Basic …``
   token (8+ characters with a digit, or 20+), an ``sk-…`` key (OpenAI's and Anthropic's shape), and a URL's password
   (``scheme://user:…@host``).

Pure and cheap: the patterns are compiled once per set of secrets (one pattern for every
form of every secret); a string with no match comes back as it was.
"""

from __future__ import annotations

import logging
import re
from functools import cache
from typing import Any

from django.conf import settings

from .forms import Forms

# Credential shapes, most specific first. Each keeps what names the credential and
# replaces the credential itself.
_HEADER = re.compile(r"(?im)(\b(?:proxy-)?authorization\b|\bx-api-key\b|\bapi-key\b)(\s*[:=]\s*['\"]?)([^\r\n'\",;}]+)")
# A token looks like one: 8+ characters with a digit, or 20+ ("the bearer of tokens" is prose).
_TOKEN = re.compile(
    r"\b(Bearer|bearer|BEARER|Basic|BASIC)(\s+)((?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{8,}|[A-Za-z0-9._~+/=-]{20,})"
)
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/@\s]*:)(?!\*+@)([^@\s/]+)(@)")  # "**": masked already

MARKER = "[redacted: {}]"


@cache
def _secrets(items: tuple[tuple[str, str], ...]) -> Forms:
    """Every form of every configured secret, compiled once per set of secrets."""
    return Forms(items)


def _configured() -> Forms:
    secrets = getattr(settings, "SECRETS", {}) or {}
    return _secrets(tuple(sorted(secrets.items())))


def redact_text(text: str) -> str:
    """``text`` without configured secrets or credential shapes (see the module docstring)."""
    if not text:
        return text
    text = _configured().sub(text, MARKER.format)
    text = _HEADER.sub(lambda m: m.group(1) + m.group(2) + _keep(m.group(3), "credential"), text)
    text = _TOKEN.sub(lambda m: m.group(1) + m.group(2) + _keep(m.group(3), f"{m.group(1).lower()} token"), text)
    text = _SK_KEY.sub(MARKER.format("key"), text)
    return _URL_PASSWORD.sub(lambda m: m.group(1) + MARKER.format("password") + m.group(3), text)


def _keep(value: str, what: str) -> str:
    """A header's credential, unless a rule before this one already redacted it
    (``Authorization: Bearer [redacted: OPENAI_API_KEY]`` stays as it is)."""
    if "[redacted:" in value:
        return value
    scheme = value.strip().split(None, 1)
    if len(scheme) == 2 and scheme[0].lower() in ("bearer", "basic", "token"):
        label = "token" if scheme[0].lower() == "token" else f"{scheme[0].lower()} token"
        return f"{scheme[0]} {MARKER.format(label)}"
    return MARKER.format(what)


def redact(value: Any) -> Any:
    """``value`` (text, or JSON: dicts, lists, strings, numbers) with every string redacted;
    keys stay as they are. Iterative copy, so a deep value can't exhaust the stack."""
    if isinstance(value, str):
        return redact_text(value)
    if not isinstance(value, (dict, list, tuple)):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, str):
            parent[slot] = redact_text(item)
        elif isinstance(item, dict):
            copy: dict[Any, Any] = {}
            parent[slot] = copy
            for key, child in item.items():
                copy[key] = None
                stack.append((child, copy, key))
        elif isinstance(item, (list, tuple)):
            copy_list: list[Any] = [None] * len(item)
            parent[slot] = copy_list
            stack.extend((child, copy_list, i) for i, child in enumerate(item))
        else:
            parent[slot] = item
    return root[0]


class RedactingFilter(logging.Filter):
    """A handler's filter: the record's message (arguments merged in) and its traceback,
    redacted before any formatter sees them."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to logging's own error report
            return True
        record.msg, record.args = redact_text(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return True
