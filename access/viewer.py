"""Who is looking: the person whose reads ``access.managers.Scoped`` narrows.

The web sets the request (``ViewerMiddleware``), so a user the API's bearer token signs in
later in the same request is the one looked as; the CLI sets its ``--as`` user
(``looking_as``). Nobody set — a worker, the sweeper, the shell — sees everything.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from . import rules

# What has the user: a request (``.user`` read when asked) or a holder of one.
_looking: ContextVar[Any] = ContextVar("keel_access_looking", default=None)


class _As:
    def __init__(self, user: Any) -> None:
        self.user = user


@contextmanager
def looking_as(user: Any) -> Iterator[None]:
    """Read as ``user`` inside the block (None: as no one, everything)."""
    token = _looking.set(_As(user) if user is not None else None)
    try:
        yield
    finally:
        _looking.reset(token)


F = TypeVar("F", bound=Callable[..., Any])


def as_runtime(func: F) -> F:
    """``func`` reads as the runtime (everything) even inside a person's request: the
    runtime's own work across executions — a parent and its children, a cancel's cascade —
    once the person's act on the one they read is allowed. What it finds is the runtime's
    to act on, not the person's to read."""

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        token = _looking.set(None)
        try:
            return func(*args, **kwargs)
        finally:
            _looking.reset(token)

    return run  # type: ignore[return-value]


def hidden_now() -> frozenset[str]:
    """The workflows the person looking now may not read (empty when no one looks)."""
    holder = _looking.get()
    if holder is None or not rules.configured():
        return frozenset()
    user = getattr(holder, "user", None)
    if user is None:
        return frozenset()
    cached = getattr(user, "_keel_hidden", None)
    if cached is None:
        cached = user._keel_hidden = rules.hidden(user)
    return cached


class ViewerMiddleware:
    """Every request reads as its user (after ``AuthenticationMiddleware``); a streamed
    answer (a CSV export) keeps reading as them while it streams."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _looking.set(request)
        try:
            response = self.get_response(request)
        finally:
            _looking.reset(token)
        if isinstance(response, StreamingHttpResponse) and rules.configured():
            response.streaming_content = _streamed_as(request, response.streaming_content)
        return response


def _streamed_as(request: HttpRequest, chunks: Any) -> Iterator[Any]:
    token = _looking.set(request)
    try:
        yield from chunks
    finally:
        _looking.reset(token)
