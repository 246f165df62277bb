"""What the client raises: ``KeelError`` and one subclass per answer a caller handles."""

from __future__ import annotations

from typing import Any


class KeelError(Exception):
    """Any refusal of the Task API (``status``: the HTTP status; ``detail``: the body's ``detail``)."""

    def __init__(self, message: str, *, status: int | None = None, detail: Any = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail
        self.body = body


class Unauthorized(KeelError):
    """401: no token, or one that doesn't exist, expired or was revoked."""


class Forbidden(KeelError):
    """403: authenticated, without authority (not a manager, your own request, not an operator)."""


class NotFound(KeelError):
    """404: no such execution (or approval, action, artifact version)."""


class Conflict(KeelError):
    """409: the current state doesn't allow it (already decided, stale version, terminal, not waiting)."""


class Gone(KeelError):
    """410: archived and purged by retention (``body`` has ``archived_at`` and ``manifest``)."""


class InvalidInput(KeelError):
    """422: malformed input. ``field``: the first refused field, dotted, without its place
    (``input.month``, ``reason``); ``errors``: every item of the answer's ``detail``."""

    def __init__(self, message: str, *, field: str | None, errors: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.field = field
        self.errors = errors

    @property
    def fields(self) -> list[str]:
        return [f for f in (_field(e) for e in self.errors) if f]


class RateLimited(KeelError):
    """429: too many refused decisions; ``retry_after`` seconds."""

    def __init__(self, message: str, *, retry_after: int | None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class Unavailable(KeelError):
    """503: the database or the broker is out of reach for a moment; nothing was done."""


class Timeout(KeelError):
    """``wait`` gave up: the execution did not reach the statuses asked for in time."""

    def __init__(self, message: str, *, last_status: str | None, execution: Any = None) -> None:
        super().__init__(message)
        self.last_status = last_status
        self.execution = execution


class VersionMismatch(KeelError):
    """The server speaks another version of the Task API than this client."""

    def __init__(self, message: str, *, expected: str, server: str | None) -> None:
        super().__init__(message)
        self.expected = expected
        self.server = server


_BY_STATUS: dict[int, type[KeelError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    503: Unavailable,
}

_PLACES = ("body", "query", "path")


def _field(error: Any) -> str | None:
    loc = error.get("loc") if isinstance(error, dict) else None
    if not isinstance(loc, list):
        return None
    parts = [str(p) for p in loc]
    if parts and parts[0] in _PLACES:
        parts = parts[1:]
    return ".".join(parts) or None


def error_for(status: int, body: Any, *, method: str, url: str) -> KeelError:
    """The exception for an answer of ``status`` with the JSON ``body`` (``{"detail": …}``)."""
    detail = body.get("detail") if isinstance(body, dict) else body
    where = f"{method} {url}"
    if status == 422:
        errors = [e for e in detail if isinstance(e, dict)] if isinstance(detail, list) else []
        field = _field(errors[0]) if errors else None
        msg = "; ".join(f"{_field(e) or '?'}: {e.get('msg', '')}" for e in errors) or str(detail)
        return InvalidInput(f"{where} → 422 {msg}", field=field, errors=errors, status=status, detail=detail, body=body)
    if status == 429:
        retry = body.get("retry_after") if isinstance(body, dict) else None
        return RateLimited(f"{where} → 429 {detail}", retry_after=retry, status=status, detail=detail, body=body)
    kind = _BY_STATUS.get(status, KeelError)
    return kind(f"{where} → {status} {detail}", status=status, detail=detail, body=body)
