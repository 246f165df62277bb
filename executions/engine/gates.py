"""Gates: steps that stop an execution until something outside the worker happens.

The runtime knows gates only through this interface; each kind registers itself
(``register``), like workflows do. Two ship: the approval gate (``approvals.gate``,
status ``awaiting_approval``) and the wait gate (``executions.waits``, ``waiting``).

A workflow declares a gate step with a *spec* (``flow.gate(name, label=…, spec=…)``; a
``GateSpec``, ``executions.authoring.specs``); ``spec.kind`` names the gate that runs it. The runner visits the step:

- ``visit`` answers ``None`` (nothing asked yet: open), ``Reopen`` (what was asked
  lapsed: open again in a new round), ``Passed`` (the step's output; go on) or
  ``Attention`` (a person must look).
- ``visit_subject`` is ``visit`` for one exact subject (an agent's tool call, by the
  sha256 of its document): the approval of exactly that call, in any round.
- ``open`` runs inside the worker's fenced transaction, records what is asked and
  answers ``Opened``: the transition that parks the execution (no worker is held),
  its reference (``approval:12``) for the effects it guards, and an optional timer.

Around that, the runtime calls every registered gate: ``withdraw`` inside a cancel,
``on_new_version`` when a step produced a new artifact version, ``sweep`` from the
sweeper (expiry, timeouts), ``pending`` for what the screens and the API show,
``check_effect`` right before an effect the gate guards goes out (and ``grant_ref``,
what authorised it, recorded on its ledger row), and ``stale`` for a resume preview
(what the gate let through that would no longer pass that check).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.db.models import Q

    from artifacts.models import ArtifactVersion

    from ..authoring.workflow import Effect, Step, Workflow
    from ..models import Execution

JSON = dict[str, Any]


@dataclass(frozen=True)
class Passed:
    """The gate let the execution through; ``output`` is the step's checkpointed output."""

    output: JSON


@dataclass(frozen=True)
class Attention:
    """The execution can't pass and a person must look (``code``: a stuck reason)."""

    reason: str
    code: str


@dataclass(frozen=True)
class Reopen:
    """What was asked on the last visit lapsed (expired, withdrawn): ask again, in a new round."""


@dataclass(frozen=True)
class Opened:
    """What ``open`` recorded: ``transition`` parks the execution; ``ref`` names what
    authorises the effects the gate guards; ``due_at`` wakes it (a timer), or None."""

    transition: str
    ref: str
    event: str = ""
    payload: JSON = field(default_factory=dict)
    due_at: Any = None  # a datetime or a database expression
    sla_at: Any = None  # past it, the triage console calls the gate overdue (approval_overdue)


@dataclass(frozen=True)
class PendingGate:
    """An open gate, as the screens and the API show it."""

    kind: str
    step: str
    ref: str
    waiting_for: str  # a sentence: "a manager's decision on REPORT_001 V2", "the signal shipment_confirmed"
    since: datetime | None
    until: datetime | None
    details: JSON = field(default_factory=dict)


@dataclass(frozen=True)
class StaleGrant:
    """Something a gate let through that no longer holds (an approval of a version that
    is no longer the newest, by an approver who lost the authority): the effects the
    gate step ``step`` guards would be refused at ``check_effect``. ``details`` is what
    the resume preview shows (for an approval: approval_id, artifact_version,
    content_sha256); ``why`` a sentence."""

    step: str
    why: str
    details: JSON = field(default_factory=dict)


class Gate:
    """Base of every gate kind; the defaults do nothing."""

    kind: ClassVar[str]

    def visit(self, execution: Execution, step: Step) -> Passed | Attention | Reopen | None:
        raise NotImplementedError

    def visit_subject(
        self, execution: Execution, step: Step, subject_sha256: str
    ) -> Passed | Attention | Reopen | None:
        """``visit`` for one exact subject (an agent's tool call: the sha256 of its
        document): ``Passed`` when a decision on exactly that subject let it through (in
        any round: what it authorised is spent by its one effect, so a repeat finds it and
        gets the recorded receipt), ``None`` when nothing was asked this round, ``Reopen``
        when it must be asked in a new round (what was asked lapsed, or this round's
        request was about another subject), ``Attention`` otherwise. Only gates that can
        guard a tool call implement it."""
        raise NotImplementedError(f"a {self.kind} gate can't guard a tool call")

    def open(self, execution: Execution, step: Step, workflow: Workflow, *, actor_label: str) -> Opened:
        raise NotImplementedError

    def withdraw(self, execution: Execution, *, actor: AbstractBaseUser | None, actor_label: str, reason: str) -> JSON:
        """Inside a cancel's transaction: close what is open; returns what was withdrawn."""
        return {}

    def on_new_version(self, version: ArtifactVersion, *, actor_label: str) -> None:
        """Inside the step's transaction: a new artifact version was produced."""

    def sweep(self) -> list[int]:
        """From the sweeper: expire or time out what is due; returns what it closed."""
        return []

    def pending(self, execution: Execution) -> PendingGate | None:
        return None

    def pending_many(self, executions: list[Execution]) -> dict[int, PendingGate]:
        """``pending`` for a page of executions (override to batch the queries)."""
        found = {}
        for execution in executions:
            gate = self.pending(execution)
            if gate is not None:
                found[execution.pk] = gate
        return found

    def check_effect(self, execution: Execution, workflow: Workflow, gate_step: Step, effect: Effect) -> None:
        """Right before an effect this gate guards goes out: raise StepFailure if it may not."""

    def holding(self) -> Q | None:
        """The executions this gate holds open, as a condition on ``Execution`` rows (an
        approval request pending, a wait open, children started at the current step), or
        None. The sweeper flags a parked execution no gate holds and no timer wakes: it
        would otherwise wait for nothing, forever (``unheld``)."""
        return None

    def stale(self, execution: Execution) -> list[StaleGrant]:
        """What this gate let through for ``execution`` that ``check_effect`` would now
        refuse, for effects not yet done (read only; the resume preview)."""
        return []

    def grant_ref(self, execution: Execution, gate_step: Step) -> str:
        """The reference of what authorises the effects ``gate_step`` guards, from the
        step's recorded outcome (``approval:12``; "" when it records none). The ledger
        keeps it on each guarded action — also one sent by a restart that reused the
        outcome — so every effect names what authorised it."""
        return ""


_gates: dict[str, Gate] = {}


def register(gate: Gate) -> Gate:
    _gates[gate.kind] = gate
    return gate


def get(kind: str) -> Gate:
    try:
        return _gates[kind]
    except KeyError:
        raise LookupError(f"no gate of kind {kind!r} is registered") from None


def registered() -> list[Gate]:
    return list(_gates.values())


def withdraw_all(execution: Execution, *, actor=None, actor_label: str, reason: str) -> JSON:
    withdrawn: JSON = {}
    for gate in _gates.values():
        withdrawn.update(gate.withdraw(execution, actor=actor, actor_label=actor_label, reason=reason))
    return withdrawn


def new_version(version: ArtifactVersion, *, actor_label: str) -> None:
    for gate in _gates.values():
        gate.on_new_version(version, actor_label=actor_label)


def sweep_all() -> dict[str, list[int]]:
    return {gate.kind: gate.sweep() for gate in _gates.values()}


def pending_of(execution: Execution) -> PendingGate | None:
    """The open gate ``execution`` waits at, if any."""
    for gate in _gates.values():
        found = gate.pending(execution)
        if found is not None:
            return found
    return None


def stale_of(execution: Execution) -> list[StaleGrant]:
    """Every gate's ``stale`` for ``execution``."""
    return [grant for gate in _gates.values() for grant in gate.stale(execution)]


def held() -> Q:
    """Executions some gate holds open (every gate's ``holding``)."""
    from django.db.models import Q

    condition = Q(pk__in=[])
    for gate in _gates.values():
        holds = gate.holding()
        if holds is not None:
            condition |= holds
    return condition


def pending_for(executions: list[Execution]) -> dict[int, PendingGate]:
    """``pending_of`` for a page of executions: one batch per gate kind."""
    found: dict[int, PendingGate] = {}
    for gate in _gates.values():
        for pk, pending in gate.pending_many(executions).items():
            found.setdefault(pk, pending)
    return found
