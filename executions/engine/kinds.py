"""Step kinds that plug into the engine: the runner looks a step's kind up here.

The engine runs the kinds that are its own: a compute step (safe to rerun until
checkpointed), an effect (through the ledger) and a gate step (by the gate of its
spec's kind, ``executions.engine.gates``). Any other kind registers a ``StepHandler``
when its app loads, as gates do — the agent runtime (``executions.agent``) registers
``model`` and ``agent`` — so the runner never imports what plugs into it.

``StepHandler.run(lease, ctx, workflow, step)`` runs one visit of the step under the
worker's lease and answers ``Done(output)``, which the runner checkpoints, or
``Parked()``: the step parked the execution at a gate and gave the lease back
(``executions.engine.parking``). It raises as step code does: ``StepFailure`` (the
retry policy decides), ``NeedsAttention`` (a person looks), ``LeaseLost`` or
``ExecutionStopped`` (the slice ends, nothing more written).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ..authoring.step_context import StepContext
    from ..authoring.workflow import Step, Workflow
    from .leases import Lease

JSON = dict[str, Any]


@dataclass(frozen=True)
class Done:
    """The step's output, for the runner's checkpoint."""

    output: JSON


@dataclass(frozen=True)
class Parked:
    """The execution waits at a gate; the worker has let it go."""


class StepHandler:
    """Base of every pluggable step kind; ``kind`` is the ``Step.kind`` it runs."""

    kind: ClassVar[str]

    def run(self, lease: Lease, ctx: StepContext, workflow: Workflow, step: Step) -> Done | Parked:
        raise NotImplementedError


_handlers: dict[str, StepHandler] = {}


def register(handler: StepHandler) -> StepHandler:
    _handlers[handler.kind] = handler
    return handler


def get(kind: str) -> StepHandler:
    try:
        return _handlers[kind]
    except KeyError:
        raise LookupError(f"no step kind {kind!r} is registered (is the app that provides it installed?)") from None
