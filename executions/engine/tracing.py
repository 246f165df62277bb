"""Traces: every execution is one OpenTelemetry trace, across processes, crashes and resumes.

The trace id is derived from the execution (its id and the instant it was created), so
every process that touches it — the web request that started it, each worker that ran a
slice, the one that resumed it after a crash — puts its spans in the same trace without
passing a context along: the Celery message says "look at execution X", and X names the
trace. Each span's parent is the trace's root span, ``keel.execution``, whose id is
derived the same way; it is exported once, when the execution ends (it spans its whole
life, ``created_at`` to the end), so a trace viewer shows the steps under it.

The spans (docs/operations.md, "Traces and errors"):

- ``keel.step``, one per visit attempt: ``keel.execution.id``, ``keel.workflow``,
  ``keel.workflow.version``, ``keel.step``, ``keel.visit``, ``keel.outcome`` (the step
  run's ``succeeded`` or ``failed``; ``waiting`` at a gate, ``parked``, ``stopped``).
  It ends after the step's outcome committed: a step completed before a crash is never
  run again, so its span is never exported twice.
- ``chat {model}`` per model call that reached the provider (a call answered from the
  journal makes none), with the GenAI semantic conventions; the prompt and the answer
  only with ``KEEL_TRACE_CONTENT=on``.
- ``execute_tool {name}`` per tool call an agent made; ``keel.effect`` per ledger call
  (``keel.action.key``, ``keel.action.status``).
- ``keel.start``, ``keel.decision``…: what a person's request did to the execution,
  linked both ways with the web request's own span (Django's instrumentation).

Off unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``…_TRACES_ENDPOINT``) is set: then
``start`` installs the SDK (``executions.apps``), and until it does every helper here
is a check of one module global and nothing else. The exporter is batched and bounded
(the SDK's ``BatchSpanProcessor``): a collector that is slow or gone never slows or
fails a step; spans that can't be sent are dropped.

``trace_id_of`` works with tracing off too: the API and the logs name the trace an
execution would have, so a team can turn tracing on later and find the same ids.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from ..models import Execution
from ..redaction import redact
from . import logcontext

_tracer: Any = None  # the SDK's tracer once ``start`` ran; None: tracing is off
_content = False  # KEEL_TRACE_CONTENT: prompts and answers on the model spans
# The (trace id, span id) the next span created without a parent takes: the root
# ``keel.execution`` span, whose ids are derived from the execution (``_ids``).
_forced_ids: ContextVar[tuple[int, int] | None] = ContextVar("keel_forced_ids", default=None)
_step_span: ContextVar[Any] = ContextVar("keel_step_span", default=None)
_quiet: ContextVar[bool] = ContextVar("keel_tracing_quiet", default=False)  # ``quiet()``: nothing here is traced
_sampler: Any = None  # the provider's, asked once per trace (``_sampled``)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def enabled() -> bool:
    return _tracer is not None


def _on() -> bool:
    return _tracer is not None and not _quiet.get()


@contextmanager
def quiet() -> Iterator[None]:
    """Nothing done inside is traced: a replay (``keel replay`` runs an execution's steps
    again against new code) is no part of the execution's story."""
    reset = _quiet.set(True)
    try:
        yield
    finally:
        _quiet.reset(reset)


def _ids(execution: Execution) -> tuple[int, int]:
    """(trace id, root span id) of ``execution``: from its id and creation instant, so two
    installations' RUN_0001 are two traces."""
    created = execution.created_at
    micros = (created - _EPOCH) // timedelta(microseconds=1) if isinstance(created, datetime) else 0
    digest = hashlib.sha256(f"keel-execution:{execution.pk}:{micros}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace_id, span_id


def trace_id_of(execution: Execution) -> str:
    """The execution's trace id, 32 hex digits (W3C trace context), tracing on or off."""
    return f"{_ids(execution)[0]:032x}"


def trace_url(execution: Execution, template: str) -> str:
    """``KEEL_TRACE_URL`` (a template with ``{trace_id}``) for ``execution``; "" without one."""
    return template.replace("{trace_id}", trace_id_of(execution)) if template else ""


def start(*, service_name: str, content: bool) -> None:
    """Install the OpenTelemetry SDK: an OTLP/HTTP exporter configured by the standard
    ``OTEL_*`` variables, behind a batching processor; Django's request spans."""
    global _tracer, _content, _sampler
    if _tracer is not None:
        return
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class _Ids(RandomIdGenerator):
        def generate_trace_id(self) -> int:
            forced = _forced_ids.get()
            return forced[0] if forced is not None else super().generate_trace_id()

        def generate_span_id(self) -> int:
            forced = _forced_ids.get()
            return forced[1] if forced is not None else super().generate_span_id()

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}), id_generator=_Ids())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _tracer = provider.get_tracer("keel")
    _sampler = provider.sampler  # OTEL_TRACES_SAMPLER (parent-based, always on, by default)
    _content = content
    logcontext.span_ids = current_ids  # the log lines name the span they were written in
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    DjangoInstrumentor().instrument(tracer_provider=provider)


def flush(timeout_ms: int = 5000) -> None:
    """Export what is batched (a process about to exit)."""
    if _tracer is not None:
        from opentelemetry import trace

        trace.get_tracer_provider().force_flush(timeout_ms)  # type: ignore[attr-defined]


def _in_trace(execution: Execution) -> Any:
    """The OpenTelemetry context whose parent is ``execution``'s root span: the current
    span when it already belongs to that trace (a model call inside its step), else the
    root itself (a remote parent: it is exported when the execution ends)."""
    from opentelemetry import trace

    trace_id, root = _ids(execution)
    current = trace.get_current_span()
    if current.get_span_context().trace_id == trace_id:
        return None  # the current context
    flags = trace.TraceFlags(trace.TraceFlags.SAMPLED if _sampled(trace_id) else trace.TraceFlags.DEFAULT)
    parent = trace.SpanContext(trace_id=trace_id, span_id=root, is_remote=True, trace_flags=flags)
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


@functools.lru_cache(maxsize=4096)
def _sampled(trace_id: int) -> bool:
    """Whether the configured sampler keeps this trace, asked as for its root: a ratio
    sampler decides by the trace id, so every span of an execution — its root, its steps
    in every process — is kept or dropped together."""
    return bool(_sampler.should_sample(None, trace_id, "keel.execution").decision.is_sampled())


def _base(execution: Execution) -> dict[str, Any]:
    return {
        "keel.execution.id": execution.ref,
        "keel.workflow": execution.workflow,
        "keel.workflow.version": execution.workflow_version,
    }


class _Off:
    """What every helper yields with tracing off: takes attributes and drops them."""

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def add_event(self, name: str, attributes: dict[str, Any] | None = None) -> None:
        pass


OFF = _Off()


@contextmanager
def span(name: str, execution: Execution | None, **attributes: Any) -> Iterator[Any]:
    """A span of ``execution``'s trace, under the current span of that trace if there is
    one; ``execution`` None: under the current span (an effect inside its step's span).

    An exception leaving it marks it an error, unless its class says it is how the
    runtime stops for a person or from outside (``traced_as_error = False``: a call
    parked at its approval, a provider's question, an execution stopped under its worker)."""
    if not _on():
        yield OFF
        return
    attrs = {**(_base(execution) if execution is not None else {}), **_present(attributes)}
    parent = _in_trace(execution) if execution is not None else None
    with _tracer.start_as_current_span(
        name, context=parent, attributes=attrs, record_exception=False, set_status_on_exception=False
    ) as current:
        try:
            yield current
        except BaseException as exc:
            if getattr(exc, "traced_as_error", True):
                from opentelemetry.trace import Status, StatusCode

                current.record_exception(exc)
                current.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:300]))
            raise


def _present(attributes: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in attributes.items() if value is not None}


@contextmanager
def step(execution: Execution, step_name: str, visit: Any) -> Iterator[Any]:
    """``keel.step`` for one visit attempt; ``visit`` is called only with tracing on (it may
    read the database). ``outcome`` names how it ended; ``stopped`` when nothing did."""
    if not _on():
        yield OFF
        return
    with span("keel.step", execution, **{"keel.step": step_name, "keel.visit": visit()}) as current:
        reset = _step_span.set(current)
        try:
            yield current
        except BaseException:
            # Whatever the attempt noted (a step run made but whose fenced write lost the
            # lease), nothing of it committed: the worker that took over tells the outcome.
            current.set_attribute("keel.outcome", "stopped")
            raise
        finally:
            _step_span.reset(reset)
            if not getattr(current, "attributes", {}).get("keel.outcome"):
                current.set_attribute("keel.outcome", "stopped")


def outcome(value: str, **attributes: Any) -> None:
    """How the current step's attempt ended (its step run's outcome, or ``waiting``…)."""
    current = _step_span.get()
    if current is None:
        return
    current.set_attribute("keel.outcome", value)
    for key, attr in attributes.items():
        if attr is not None:
            current.set_attribute(key, attr)


def event(name: str, **attributes: Any) -> None:
    """An event on the current step's span (a gate opened)."""
    current = _step_span.get()
    if current is not None:
        current.add_event(name, _present(attributes))


def content_attribute(value: Callable[[], Any]) -> str | None:
    """A prompt or an answer for a model span, redacted, as JSON: only with
    ``KEEL_TRACE_CONTENT=on`` (``value`` is not called otherwise)."""
    if not _content or not _on():
        return None
    shown = redact(value())
    return shown if isinstance(shown, str) else json.dumps(shown, ensure_ascii=False, default=str)


def mark(name: str, execution: Execution, **attributes: Any) -> None:
    """Once the caller's transaction commits: a short span ``name`` in the execution's
    trace, linked both ways with the current span (the web request's, when a person's
    request did it). Nothing with tracing off."""
    if not _on():
        return
    from opentelemetry import trace

    request = trace.get_current_span()
    request_context = request.get_span_context()

    def emit() -> None:
        links = [trace.Link(request_context)] if request_context.is_valid else []
        attrs = {**_base(execution), **_present(attributes)}
        created = _tracer.start_span(name, context=_in_trace(execution), attributes=attrs, links=links)
        if request_context.is_valid and request.is_recording():
            request.add_link(created.get_span_context())
        created.end()

    transaction.on_commit(emit)


def ended(execution: Execution) -> None:
    """Once the caller's transaction commits: the root span ``keel.execution``, from its
    creation to now, with the status it ended in. Called by the one writer of status
    (``lifecycle.apply``) when the execution became terminal. Sent once, with the
    batch after it: a process that dies before that batch leaves the trace without its
    root (a viewer shows the steps under a root it never received)."""
    if not _on():
        return
    ids = _ids(execution)
    status = execution.status
    created = execution.created_at

    def emit() -> None:
        from opentelemetry import context

        reset = _forced_ids.set(ids)
        try:
            forced = _tracer.start_span(
                "keel.execution",
                context=context.Context(),  # no parent: this is the root
                attributes={**_base(execution), "keel.status": status},
                start_time=int(created.timestamp() * 1_000_000_000) if created else None,
            )
        finally:
            _forced_ids.reset(reset)
        forced.end(end_time=int(timezone.now().timestamp() * 1_000_000_000))

    transaction.on_commit(emit)


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) of the current span, for a log line; None without one."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"
