"""The runtime's face for the apps built on it: everything approvals, triage,
notifications, retention, fleet, the console and config use of the engine and the agent
runtime comes from here (import-linter's protected contracts keep ``executions.engine``
and ``executions.agent`` for ``executions`` itself). Workflow authors have their own
surface, ``executions.authoring``.

    from executions import runtime

    runtime.record(execution, "hold.placed", actor=user, payload={...})

The names, by what an app does with them:

- *plug in*: a step kind (``StepHandler`` and what its visit answers: ``Done``,
  ``Parked``; ``register_step_kind``, ``step_kind``, ``step_kinds``; the model behind
  the journal, ``journaled_model``; ``declaration``, its ``flow.<name>(…)``; how a
  visit stops for a person, ``NeedsAttention``), a gate (``Gate`` and what its visit answers: ``Passed``, ``Attention``,
  ``Reopen``, ``Opened``; ``register_gate``), an event type (``EventType``,
  ``register_event_type``, ``event_types``), the queues a worker consumes
  (``set_consumers``, ``routed_queues``, ``ADVANCE``);
- *change one execution inside the caller's transaction*: ``transition`` (the one
  writer of its status), ``record`` (an event), ``dispatch_on_commit`` (the doorbell),
  and, the execution locked, ``execution_continue`` (a gate let it through),
  ``withdraw_gates`` (close what its gates asked: a cancel's, a migration's),
  ``execution_rewind`` (back to an earlier step, in a new round), ``cancel_locked``,
  ``resume_locked`` (the one resume, its blockers checked in one place);
- *effects beside the steps and the ledger's other rows*: ``record_beside``,
  ``perform_beside``, ``authorise``, ``record_compensations``, ``close_compensation``,
  ``locked_by_key`` (an action and its execution, locked in order, for an operator's word),
  ``resolved_failed`` (an operator's "it did not happen": never sent again under its key);
- *reads*: a gate's pending request and stale grants (``pending_of``, ``stale_of``,
  ``PendingGate``, ``StaleGrant``), the journal (``call_key``, ``response_of``,
  ``accepted``, ``ACCEPTED``, ``ModelDrift``), an agent's recorded tool results
  (``recorded_results``, ``TOOL_CALL_ARTIFACT_KIND``), a compiled read
  (``CompiledRead``), the database clock (``in_seconds``);
- *replay*: how a kind's ``StepHandler.replay`` stops (``ReplayEnded``, ``ReplayDrift``);
- *the process*: ``worker_identity``, ``unavailable`` (an outage of the database or
  the broker), ``get_model_client``, ``failpoint`` (the crash tests' hook);
- *traces*: ``trace_id_of`` (an execution's trace id, tracing on or off), ``trace_url``
  (``KEEL_TRACE_URL`` filled in), ``trace_mark`` (a person's act as a span of the
  execution's trace, linked with the web request's), ``untraced`` (a replay: nothing
  inside is traced).

Imports the engine, the agent runtime and the services; imported by the apps, never by
a room of ``executions``.
"""

from __future__ import annotations

from .acts import allows as may
from .acts import require
from .agent.modelclient import get_model_client
from .agent.replaying import Drift as ReplayDrift
from .agent.replaying import Ended as ReplayEnded
from .agent.steps import TOOL_CALL_ARTIFACT_KIND, recorded_results
from .authoring.declarations import declaration
from .engine.compiled import CompiledRead
from .engine.dispatch import ADVANCE, dispatch_on_commit
from .engine.events import EventType
from .engine.events import register as register_event_type
from .engine.events import registered as event_types
from .engine.failpoints import hit as failpoint
from .engine.gates import Attention, Gate, Opened, Passed, PendingGate, Reopen, StaleGrant, pending_of, stale_of
from .engine.gates import register as register_gate
from .engine.gates import withdraw_all as withdraw_gates
from .engine.journal import ACCEPTED, JournaledModel, ModelDrift, accepted, call_key, response_of
from .engine.kinds import Done, Parked, StepHandler
from .engine.kinds import get as step_kind
from .engine.kinds import register as register_step_kind
from .engine.kinds import registered as step_kinds
from .engine.leases import Lease, in_seconds, worker_identity
from .engine.ledger import (
    authorise,
    close_compensation,
    locked_by_key,
    perform_beside,
    record_beside,
    record_compensations,
    resolved_failed,
)
from .engine.lifecycle import apply as transition
from .engine.lifecycle import record
from .engine.outages import unavailable
from .engine.routing import routed_queues, set_consumers
from .engine.tracing import mark as trace_mark
from .engine.tracing import quiet as untraced
from .engine.tracing import trace_id_of, trace_url
from .errors import NeedsAttention
from .models import Execution
from .services import cancel_locked, execution_continue, execution_rewind, resume_locked


def journaled_model(lease: Lease, execution: Execution, step: str) -> JournaledModel:
    """The configured model behind the journal, for a step kind's visit under ``lease``:
    ``ask(request)`` answers from the journal when the call was recorded, else asks the
    provider and records the answer before the step goes on."""
    return JournaledModel(get_model_client(), lease=lease, execution=execution, step=step)


__all__ = [
    "ACCEPTED",
    "ADVANCE",
    "TOOL_CALL_ARTIFACT_KIND",
    "Attention",
    "CompiledRead",
    "Done",
    "EventType",
    "Gate",
    "ModelDrift",
    "NeedsAttention",
    "Opened",
    "Passed",
    "Parked",
    "PendingGate",
    "Reopen",
    "ReplayDrift",
    "ReplayEnded",
    "StaleGrant",
    "StepHandler",
    "accepted",
    "authorise",
    "call_key",
    "cancel_locked",
    "close_compensation",
    "declaration",
    "dispatch_on_commit",
    "event_types",
    "execution_continue",
    "execution_rewind",
    "failpoint",
    "get_model_client",
    "in_seconds",
    "journaled_model",
    "locked_by_key",
    "may",
    "pending_of",
    "perform_beside",
    "record",
    "record_beside",
    "record_compensations",
    "resolved_failed",
    "recorded_results",
    "register_event_type",
    "register_gate",
    "register_step_kind",
    "require",
    "response_of",
    "resume_locked",
    "routed_queues",
    "set_consumers",
    "stale_of",
    "step_kind",
    "step_kinds",
    "trace_id_of",
    "trace_mark",
    "trace_url",
    "transition",
    "unavailable",
    "untraced",
    "withdraw_gates",
    "worker_identity",
]
