"""Errors to Sentry: with ``SENTRY_DSN`` set, every process reports its errors (Django's
and Celery's integrations, and every ``log.exception`` — a step that raised, a slice
that failed) to the team's Sentry.

Each event is tagged with what the slice it happened in names (``execution``,
``workflow``, ``step``, ``lease_token``, and its ``trace_id``, so an error leads to its
trace) and passes through keel's redaction before it leaves the process
(``executions.redaction``: no configured secret, nothing shaped like a credential — in
the message, the breadcrumbs, the stack's local variables). ``send_default_pii`` stays
off: no user names, addresses or cookies; neither request bodies nor a frame's local
variables are sent. Off when the variable is unset: nothing is imported.
"""

from __future__ import annotations

from typing import Any

from ..redaction import redact
from . import logcontext


def _before_send(event: Any, hint: dict[str, Any]) -> Any:
    bound = logcontext.current()
    if bound is not None:
        tags = event.setdefault("tags", {})
        tags.update(execution=bound.execution, step=bound.step or "-", lease_token=str(bound.lease_token))
        if bound.workflow:
            tags["workflow"] = bound.workflow
        if bound.trace_id:
            tags["trace_id"] = bound.trace_id
    return redact(event)


def start(*, dsn: str) -> None:
    """Initialise the Sentry SDK (its environment and release from ``SENTRY_ENVIRONMENT``
    and ``SENTRY_RELEASE``, as the SDK reads them)."""
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration

    sentry_sdk.init(
        dsn=dsn,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        send_default_pii=False,
        # Nothing of a request's body (an execution's input, a decision's comment) nor a
        # frame's variables (prompts, customers' data): the type, message and stack only.
        max_request_body_size="never",
        include_local_variables=False,
        before_send=_before_send,
        traces_sample_rate=None,  # traces go to OpenTelemetry (executions.engine.tracing), not here
    )
