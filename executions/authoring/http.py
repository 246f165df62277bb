"""Calling an external HTTP service from an effect, with failures sorted by type.

The distinction that matters: a request that never left (connection refused) is
``transient``; one that may have arrived (read timeout, connection dropped after
sending) is ``outcome_unknown`` and must be reconciled, never blindly repeated.
"""

from __future__ import annotations

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
        response = _session().request(method, url, headers=headers, timeout=timeout, **body)
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
    return _classify(response, url)


def _classify(response: requests.Response, url: str) -> dict[str, Any]:
    """The answer, redacted (executions.redaction) before anyone stores it: a receipt, a
    tool's result or an error body may quote what it was sent."""
    try:
        payload = redact(response.json())
    except ValueError:
        payload = {"body": redact(response.text)[:500]}
    code = response.status_code
    if 200 <= code < 300:
        return payload
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
