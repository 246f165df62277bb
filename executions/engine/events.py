"""Event types: what ``POST /api/executions/{id}/events`` delivers, each owned by the
gate that waits for it.

A gate that takes events registers an ``EventType`` when its app loads, as it
registers itself: the wait gate the ``signal`` (``executions.waits``), the approval
gate the ``approval.decision`` (``approvals.events``). The events endpoint
(``executions.api``) is built from the registry: its body is one of the registered
bodies, told apart by ``type``, and goes to that type's ``handle``; its answers are
theirs. The engine never imports what registers here.

``handle(ref=, user=, body=)`` delivers the validated ``body`` to execution ``ref`` for
``user`` and returns the 202 answer (shaped as ``answer``), idempotent by the body's
``event_id``; it raises the services' errors (NotFound, Forbidden, Conflict…), which
the API maps as everywhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, Field

from ..storable import STORABLE

JSON = dict[str, Any]
# What every event body carries: the sender's id for it, reused on retries.
EventId = Annotated[str, Field(min_length=1, max_length=100), STORABLE]


@dataclass(frozen=True, kw_only=True)
class EventType:
    """One kind of event. ``body``: a pydantic model whose ``type`` field is
    ``Literal[name]``; ``answer``: the model of the 202 body; ``responses``: other
    answers it may give, by status code (a 429, say); ``summary``: a line for the docs."""

    name: str
    body: type[BaseModel]
    answer: type
    handle: Callable[..., JSON]
    responses: dict[int, type] = field(default_factory=dict)
    summary: str = ""


_types: dict[str, EventType] = {}


def register(event_type: EventType) -> EventType:
    _types[event_type.name] = event_type
    return event_type


def get(name: str) -> EventType:
    try:
        return _types[name]
    except KeyError:
        raise LookupError(f"no event type {name!r} is registered") from None


def registered() -> list[EventType]:
    """Every registered event type, by name."""
    return [_types[name] for name in sorted(_types)]
