"""Log lines that carry the execution: inside a slice, every line a worker writes names
the execution, the step and the lease token.

``slice_of(ref, token)`` binds them for the slice (a context variable, so a thread
started inside it with ``contextvars.copy_context`` — the heartbeat — carries them
too); ``at_step(name)`` moves to the next step. ``SliceFilter`` (on the log handler,
settings.LOGGING) puts them on every record: ``execution``, ``step``, ``lease_token``
(None outside a slice) and ``slice``, the plain format's `` [RUN_0042 publish lease=7]``.
``JsonFormatter`` writes one JSON object per line (``KEEL_LOG_FORMAT=json``), with the
execution's ``trace_id`` (``executions.engine.tracing``: derived from the execution, so
present with tracing off too) and, with tracing on, the current ``span_id``.
Imports nothing of Django: the logging configuration loads it before the apps.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass
class SliceLog:
    execution: str
    lease_token: int
    step: str = ""
    trace_id: str = ""
    workflow: str = ""


_current: ContextVar[SliceLog | None] = ContextVar("keel_slice_log", default=None)
# (trace id, span id) of the current span, set by executions.engine.tracing when tracing is on.
span_ids: Callable[[], tuple[str, str] | None] | None = None


@contextmanager
def slice_of(execution: str, lease_token: int) -> Iterator[SliceLog]:
    bound = SliceLog(execution=execution, lease_token=lease_token)
    reset = _current.set(bound)
    try:
        yield bound
    finally:
        _current.reset(reset)


def at_step(step: str) -> None:
    bound = _current.get()
    if bound is not None:
        bound.step = step


def of_execution(*, workflow: str, trace_id: str) -> None:
    """The slice's execution's workflow and trace id, once it was read."""
    bound = _current.get()
    if bound is not None:
        bound.workflow, bound.trace_id = workflow, trace_id


def current() -> SliceLog | None:
    """What the current slice names (execution, step, lease token, trace), or None."""
    return _current.get()


class SliceFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        bound = _current.get()
        record.execution = bound.execution if bound else None
        record.step = (bound.step or None) if bound else None
        record.lease_token = bound.lease_token if bound else None
        record.slice = f" [{bound.execution} {bound.step or '-'} lease={bound.lease_token}]" if bound else ""
        record.trace_id = (bound.trace_id or None) if bound else None
        record.span_id = None
        ids = span_ids() if span_ids is not None else None
        if ids is not None:
            record.trace_id, record.span_id = ids
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, process,
    and the slice's execution, step, lease_token and trace_id when there is one, the
    span_id with tracing on."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for name in ("execution", "step", "lease_token", "trace_id", "span_id"):
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_text:  # as the redacting filter left it
            line["exception"] = record.exc_text
        elif record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)
