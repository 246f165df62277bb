"""Calling an external HTTP service from an effect, with failures sorted by type.

The distinction that matters: a request that never left (connection refused) is
``transient``; one that may have arrived (read timeout, connection dropped after
sending) is ``outcome_unknown`` and must be reconciled, never blindly repeated.

What comes back is bounded (docs/operations.md, "Security"):

- a redirect is never followed (a signed webhook or an effect's body goes only where it
  was configured): a 3xx is a failure of the call, the ``Location`` in its evidence —
  ``outcome_unknown`` when the request could have acted before redirecting (a 301, 302
  or 303 to a POST, PUT, PATCH or DELETE: reconcile by lookup), else ``invalid_input``
  (a GET, or a 307/308, which say nothing was done: the same request can't succeed);
- at most ``ANSWER_LIMIT`` bytes of an answer are read (decoded). A larger 2xx answer
  is never stored: ``invalid_input`` for a GET or HEAD (asking again gets the same),
  ``outcome_unknown`` for anything else (it was accepted, its receipt can't be read:
  reconcile by lookup); a larger error answer is classified by its status as usual,
  with the first ``ANSWER_LIMIT`` bytes read and at most 500 characters kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import requests
from django.conf import settings

from ..errors import FailureKind, StepFailure
from ..redaction import redact

_timeout: ContextVar[float | None] = ContextVar("effect_call_timeout", default=None)


@contextmanager
def call_timeout(seconds: float | None) -> Iterator[None]:
    """Within this block, effect calls wait at most ``seconds`` for an answer (None: the default)."""
    token = _timeout.set(seconds)
    try:
        yield
    finally:
        _timeout.reset(token)


_offline: ContextVar[bool] = ContextVar("no_calls_leave", default=False)


class CallRefused(RuntimeError):
    """A step tried to call a service while calls are refused (``keel replay``)."""


@contextmanager
def offline() -> Iterator[None]:
    """Within this block no request leaves (``request_json`` raises CallRefused): a replay
    calls nothing."""
    token = _offline.set(True)
    try:
        yield
    finally:
        _offline.reset(token)


_NOT_SENT_MARKERS = ("NewConnectionError", "Failed to establish", "ConnectTimeout", "Connection refused")
ANSWER_LIMIT = 256 * 1024  # bytes of an answer read at most (decoded)
_SAFE = ("GET", "HEAD")  # methods that change nothing at the other end
_MAY_HAVE_ACTED = (301, 302, 303)  # redirects a service may send after acting (post/redirect/get)


def _session() -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # never route local services through a proxy
    return session


def request_json(method: str, url: str, *, body: dict | None = None, key: str | None = None) -> dict[str, Any]:
    """Send one request; return the JSON body of a 2xx answer or raise StepFailure."""
    return _send(method, url, key=key, json=body)


def post_bytes(url: str, data: bytes, *, key: str, headers: dict[str, str]) -> dict[str, Any]:
    """POST ``data`` exactly as given (a signed body must arrive byte for byte) as JSON,
    with ``headers``; the answer and the failures sorted as ``request_json``'s."""
    return _send("POST", url, key=key, data=data, headers={"Content-Type": "application/json", **headers})


def _send(method: str, url: str, *, key: str | None, headers: dict[str, str] | None = None, **body: Any) -> dict:
    if _offline.get():
        raise CallRefused(f"{method} {url}: no call leaves during a replay")
    headers = {**(headers or {}), **({"Idempotency-Key": key} if key else {})}
    timeout = (3.0, _timeout.get() or settings.RUNTIME_EFFECT_TIMEOUT_SECONDS)
    try:
        response = _session().request(
            method, url, headers=headers, timeout=timeout, allow_redirects=False, stream=True, **body
        )
    except requests.ConnectTimeout as exc:
        raise StepFailure(FailureKind.TRANSIENT, f"could not connect to {url}: {exc}") from None
    except requests.ReadTimeout:
        raise StepFailure(
            FailureKind.OUTCOME_UNKNOWN, f"no answer from {url} within {timeout[1]:g}s after sending"
        ) from None
    except requests.ConnectionError as exc:
        if any(marker in str(exc) for marker in _NOT_SENT_MARKERS):
            raise StepFailure(FailureKind.TRANSIENT, f"could not connect to {url}") from None
        raise StepFailure(FailureKind.OUTCOME_UNKNOWN, f"connection to {url} dropped after sending: {exc}") from None
    try:
        with response:
            data, whole = _read(response)
    except requests.RequestException as exc:
        raise StepFailure(
            FailureKind.OUTCOME_UNKNOWN, f"the answer of {url} was cut off after sending: {exc}"
        ) from None
    return _classify(response, url, method, data, whole)


def _read(response: requests.Response) -> tuple[bytes, bool]:
    """At most ``ANSWER_LIMIT`` bytes of the answer, and whether that was all of it."""
    chunks, size = [], 0
    for chunk in response.iter_content(chunk_size=64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if size > ANSWER_LIMIT:
            return b"".join(chunks)[:ANSWER_LIMIT], False
    return b"".join(chunks), True


def _payload(response: requests.Response, data: bytes, whole: bool) -> Any:
    """The answer as JSON (or ``{"body": its first 500 characters}``), redacted."""
    if whole:
        try:
            return redact(json.loads(data))
        except (ValueError, RecursionError):
            pass
    text = data[:2000].decode(response.encoding or "utf-8", errors="replace")
    return {"body": redact(text)[:500]}


def _classify(response: requests.Response, url: str, method: str, data: bytes, whole: bool) -> dict[str, Any]:
    """The answer, redacted (executions.redaction) before anyone stores it: a receipt, a
    tool's result or an error body may quote what it was sent."""
    payload = _payload(response, data, whole)
    code = response.status_code
    if 200 <= code < 300 and whole:
        return payload
    if 200 <= code < 300:
        kind = FailureKind.INVALID_INPUT if method in _SAFE else FailureKind.OUTCOME_UNKNOWN
        message = f"{url} answered {code} with more than {ANSWER_LIMIT} bytes: not read, not stored"
        raise StepFailure(kind, message, evidence={"status": code, "limit_bytes": ANSWER_LIMIT, "answer": payload})
    if 300 <= code < 400:
        location = redact(response.headers.get("Location", ""))
        acted = code in _MAY_HAVE_ACTED and method not in _SAFE
        message = f"{url} answered {code} redirecting to {location or '(no Location)'}: redirects are not followed"
        kind = FailureKind.OUTCOME_UNKNOWN if acted else FailureKind.INVALID_INPUT
        raise StepFailure(kind, message, evidence={"status": code, "location": location, "answer": payload})
    reason = payload.get("error") if isinstance(payload, dict) else None
    message = f"{url} answered {code}" + (f": {reason}" if reason else "")
    if code == 429:
        retry_after = _retry_after(response.headers.get("Retry-After"))
        raise StepFailure(FailureKind.RATE_LIMITED, message, retry_after=retry_after, evidence=payload)
    if code in (401, 403):
        raise StepFailure(FailureKind.PERMISSION, message, evidence=payload)
    if code in (400, 404, 409, 422):
        raise StepFailure(FailureKind.INVALID_INPUT, message, evidence=payload)
    if code in (502, 503, 504) or code >= 500:
        raise StepFailure(FailureKind.TRANSIENT, message, evidence=payload)
    raise StepFailure(FailureKind.BUSINESS_REJECTION, message, evidence=payload)


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
