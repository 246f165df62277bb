"""Step kinds that plug into the engine: the runner looks a step's kind up here.

The engine runs the kinds that are its own: a compute step (safe to rerun until
checkpointed), an effect (through the ledger) and a gate step (by the gate of its
spec's kind, ``executions.engine.gates``). Any other kind registers a ``StepHandler``
when its app loads, as gates do — the agent runtime (``executions.agent``) registers
``model`` and ``agent`` — so the runner never imports what plugs into it.

A kind is one module and one ``register`` call; it owns everything that depends on it:

- ``run(lease, ctx, workflow, step)`` runs one visit of the step under the worker's
  lease and answers ``Done(output)``, which the runner checkpoints, or ``Parked()``:
  the step parked the execution at a gate and gave the lease back
  (``executions.engine.parking``). It raises as step code does: ``StepFailure`` (the
  retry policy decides), ``NeedsAttention`` (a person looks), ``LeaseLost`` or
  ``ExecutionStopped`` (the slice ends, nothing more written).
- ``replay(ctx, workflow, step, model=, recorded=)`` runs the visit again for ``keel
  replay`` (triage.replay) with ``model`` the journal and ``recorded`` the visit's
  checkpointed output (None for the step the execution stands at): read only, raising
  the replay's ``Drift`` where the code now differs from the record, ``Ended`` where a
  current step's record ends.
- ``later(step)``: what the step does when a resume reaches it, one sentence for the
  resume preview (triage.preview).

A workflow declares a step of a plugged kind with ``Workflow.declare`` (its own
declaration in ``Step.spec``), or through a declaration the kind's module registers in
``executions.authoring.declarations`` (``flow.<name>(…)``): nothing in
``executions.authoring.workflow`` names a kind that plugs in. docs/architecture.md
("A new step kind") shows one written from scratch.
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

    def replay(self, ctx: StepContext, workflow: Workflow, step: Step, *, model: Any, recorded: JSON | None) -> None:
        raise NotImplementedError(f"replay doesn't know the step kind {self.kind!r}")

    def later(self, step: Step) -> str:
        raise NotImplementedError


_handlers: dict[str, StepHandler] = {}


def register(handler: StepHandler) -> StepHandler:
    _handlers[handler.kind] = handler
    return handler


def registered() -> dict[str, StepHandler]:
    """Every kind that plugged in, by name (tests check each has its replay and preview)."""
    return dict(_handlers)


def get(kind: str) -> StepHandler:
    try:
        return _handlers[kind]
    except KeyError:
        raise LookupError(f"no step kind {kind!r} is registered (is the app that provides it installed?)") from None
