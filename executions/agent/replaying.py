"""Agent and route steps run again for ``keel replay`` (triage.replay): read only, no
provider asked, nothing sent, nothing written.

The caller gives the model — the journal (each call's request rebuilt, hashed and
compared with the recorded call of its key; the recorded answer returned) — and says
whether the step is the execution's *current* one. The step's own code runs as it
would under a worker (``steps._Visit``, ``routes.choose``): its prompts are rebuilt
from the notes, its tools' arguments validated and normalised, its approvals looked
up by the effective arguments' sha256, its effects built and keyed. Where a worker
would act, the record answers instead:

- a read: its recorded result (the execution's context);
- an effect: its ledger row, found by the key the code builds now (its arguments must
  equal the row's), and the recorded receipt;
- a refusal: told to the model the same way, recorded nowhere.

What the record doesn't have ends the replay of a current step quietly (``Ended``: the
execution simply hasn't got that far — parked at the approval, stopped by its budget);
for a step that completed it is drift (``Drift``), as is an effect whose key or
arguments differ from the ledger's and a tool call no approval covers.
"""

from __future__ import annotations

from typing import Any

from ..authoring.modelcalls import ToolCall, canonical_json
from ..authoring.step_context import StepContext
from ..authoring.tools import Tool
from ..authoring.workflow import Effect, Step, Workflow
from ..engine.costs import BudgetExceeded
from ..errors import NeedsAttention, StepFailure
from ..models import Action
from . import routes, steps

JSON = dict[str, Any]


class Ended(Exception):
    """The record ends here: the execution has not got further (a current step only)."""


class Drift(Exception):
    """What the code does now differs from the record: ``kind`` (``model_call``, ``effect``,
    ``approval``), the call or action ``key``, a sentence."""

    def __init__(self, kind: str, key: str, detail: str) -> None:
        super().__init__(detail)
        self.kind, self.key, self.detail = kind, key, detail


def replay_agent(
    ctx: StepContext, workflow: Workflow, step: Step, *, model: Any, current: bool, visit: type | None = None
) -> None:
    """Run agent step ``step`` again against the record (module docstring). Raises Drift,
    or returns (the record covers it, or ends where a current step stopped). ``visit``:
    the replayed visit's class, when the step's loop is not keel's (executions.agent.foreign)."""
    replayed = (visit or _Replayed)(ctx, workflow, step, model=model, current=current)
    _settle(replayed.run, current=current, step=step)


def replay_route(ctx: StepContext, workflow: Workflow, step: Step, *, model: Any, recorded: JSON | None) -> None:
    """Run route step ``step`` again against the record: its choice asked of the journal,
    refusals told to it as a worker would, recorded nowhere; it must choose what
    ``recorded`` (the visit's output; None for the current step) says it chose."""

    def choose() -> None:
        chosen = routes.choose(ctx, workflow, step, model, refused=lambda *_: None)["route"]
        was = (recorded or {}).get("route")
        if recorded is not None and chosen != was:
            raise Drift("model_call", model.keys[-1], f"the route now chooses {chosen}; it chose {was}")

    _settle(choose, current=recorded is None, step=step)


def _settle(run, *, current: bool, step: Step) -> None:
    """Run; a stop a worker would make (a budget, a person needed, a step failure) is where
    a current step stands, and drift for a step that completed."""
    try:
        run()
    except Ended:
        if not current:
            raise Drift("model_call", "", f"{step.name} completed, but the record ends before it does now") from None
    except (NeedsAttention, StepFailure) as stop:  # BudgetExceeded is a NeedsAttention
        if not current:
            raise Drift("model_call", "", f"{step.name} completed, but it stops now: {stop}") from None


class _Replayed(steps._Visit):
    """One visit of an agent step, the record answering for the world."""

    def __init__(self, ctx: StepContext, workflow: Workflow, step: Step, *, model: Any, current: bool) -> None:
        super().__init__(None, ctx, workflow, step, model=model)
        self.current = current

    def _missing(self, kind: str, key: str, detail: str) -> Exception:
        return Ended() if self.current else Drift(kind, key, detail)

    def _check_budget(self) -> None:
        """The journal decides where the step ends, not the clock or a counter of this run."""

    def _read(self, tool: Tool, call: ToolCall, args: JSON) -> tuple[JSON, bool]:
        recorded = self.results.get(call.id)
        if recorded is None:
            raise self._missing(
                "model_call", call.id, f"{tool.name} ({call.id}) now runs, but the record has no result of it"
            )
        return recorded["content"], recorded["is_error"]

    def _refuse(self, call: ToolCall, *, key: str, reason: str) -> JSON:
        self.refusals += 1
        if self.refusals > self.spec.budget.max_refusals:
            raise BudgetExceeded(f"{self.refusals} proposals refused (at most {self.spec.budget.max_refusals})")
        return {"error": f"refused: {reason}"}

    def _approved(self, tool: Tool, call: ToolCall, args: JSON, effect: Effect) -> tuple[Effect, str]:
        try:
            return super()._approved(tool, call, args, effect)
        except steps._Park:
            document = steps.tool_call_document(tool.name, effect.args).decode()
            raise self._missing(
                "approval", call.id, f"no approval of {self.step.name} covers the call {document[:300]}"
            ) from None

    def _send(self, tool: Tool, call: ToolCall, args: JSON, effect: Effect, grant: str) -> tuple[JSON, bool]:
        row = Action.objects.filter(key=effect.key, execution_id=self.execution.pk).first()
        if row is None:
            raise self._missing("effect", effect.key, f"the code now sends {effect.key}; the ledger has no such action")
        if canonical_json(row.args) != canonical_json(effect.args):
            raise Drift("effect", effect.key, f"the arguments of {effect.key} differ from the ledger's")
        if row.status != Action.State.SUCCEEDED:
            raise self._missing("effect", effect.key, f"{effect.key} is {row.status} in the ledger")
        self.performed[effect.key] = row.receipt
        return row.receipt, False

    def _park(self, park: Any) -> None:
        raise self._missing("approval", park.call.id, f"{park.tool.name} now needs an approval the record doesn't have")
