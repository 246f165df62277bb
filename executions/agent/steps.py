"""Model and agent steps (the ``model`` and ``agent`` step kinds, registered in
``executions.agent.kinds``; the runner looks them up and never imports this module).

A model step's function gets the model behind the journal. An agent step: the model
proposes tool calls, the runtime decides.

One visit of an agent step loops: build the prompt from the execution's notes (goal,
constraints verbatim, verified facts, hypotheses, completed steps, the tools allowed
now) plus the task and this step's tool calls so far; ask the model through the
journal; then, for each proposed call:

- the tool must exist and be allowed now, and its arguments must validate against
  its schema (fail closed), else the proposal is **refused**: a ``tool_call.refused``
  event, and the refusal goes back to the model as the call's result;
- a read-only tool runs at once; its result is recorded (in the execution's context,
  with the next model call's commit) and becomes a verified fact;
- an effect goes through the ledger under a key derived from the call
  (``<model call key>:<tool>``); its receipt becomes a verified fact;
- a tool that needs approval first stores its effective arguments as an artifact
  version (canonical JSON ``{"args": …, "tool": …}``), opens the approval gate bound
  to that version and parks the execution (``executions.engine.parking``, as a gate
  step does). Back after the decision, the step runs again from its first call
  (every recorded call replays from the journal, every recorded result from the
  context); the approval of exactly these arguments is looked up by their document's
  sha256, the gate's checks run, and only then does the effect go out — keyed by the
  approval and the tool (``RUN_0001:approval:12:submit_replacement``), never by the
  model call. So an approval is spent by one effect: the model proposing the same
  call again (or a retry, a resume) gets the recorded receipt and the provider sees
  one call; a different call needs an approval of its own (a new round).

The visit ends with the model's final answer (``Done``; the workflow's ``done_when``
must hold, else a person looks), or ``Parked``. A spent budget or too many refusals
raise ``BudgetExceeded`` (needs_attention ``budget_exceeded``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import replace
from typing import Any

from django.db import transaction
from django.db.models import Sum

from artifacts import store
from artifacts.services import artifact_version_create

from ..authoring import foreign
from ..authoring.http import call_timeout
from ..authoring.modelcalls import ModelRequest, ModelResponse, ToolCall, canonical_json
from ..authoring.specs import GateSpec
from ..authoring.step_context import StepContext
from ..authoring.tools import Progress, Refused, Tool
from ..authoring.workflow import Effect, Step, StepKind, Workflow
from ..engine import gates, kinds, ledger, lifecycle, parking, tracing
from ..engine.costs import BudgetExceeded
from ..engine.journal import JournaledModel, call_key
from ..engine.leases import Lease, fence
from ..errors import FailureKind, InputNeeded, NeedsAttention, StepFailure
from ..models import Action, Execution, ExecutionEvent, ModelCall, Question
from ..reasons import StuckReason
from ..redaction import redact
from . import compaction
from .modelclient import get_model_client

JSON = dict[str, Any]
TOOL_CALL_ARTIFACT_KIND = "tool_call"
# Failures of a read-only tool the model is told about (it may try something else);
# any other kind fails the step and its retry policy decides.
TOLD_TO_THE_MODEL = (FailureKind.INVALID_INPUT, FailureKind.BUSINESS_REJECTION)


def recorded_results(execution: Execution, step: str, round: int) -> list[JSON]:
    """What an agent step's tools returned so far in ``round``, in the order the model
    proposed them (``{"id", "tool", "args", "content", "is_error"}``): what a manager
    reads beside the tool call they approve. Read only."""
    slot = ((execution.context or {}).get("agents") or {}).get(f"{step}:r{round}") or {}
    results = slot.get("results") or {}
    if not results:
        return []
    calls = ModelCall.objects.filter(execution=execution, step=step, round=round).order_by("seq", "-revision")
    ordered, seen = [], set()
    for call in calls:
        if call.seq in seen:
            continue  # an older revision of a call asked again
        seen.add(call.seq)
        for proposed in (call.response or {}).get("tool_calls", []):
            call_id = proposed.get("id") if isinstance(proposed, dict) else None
            if call_id in results:
                ordered.append({"id": call_id, **results[call_id]})
    return ordered


def _shown(content: Any, limit: int = 2000) -> str:
    """A tool's result as the timeline keeps it: compact JSON, clipped."""
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def grant_key(ref: str, grant: str, tool: str) -> str:
    """The ledger key of an approved tool call's effect: the execution, what authorised it
    (``approval:12``) and the tool (``RUN_0001:approval:12:submit_replacement``) — never
    the model call that proposed it, so an approval lets exactly one effect through."""
    return f"{ref}:{grant}:{tool}"


def tool_call_document(tool: str, args: JSON) -> bytes:
    """What a manager approves for a tool call: canonical JSON (sorted keys, no spaces, UTF-8)."""
    return canonical_json({"args": args, "tool": tool})


INPUT_ID_MAX = 300  # Question.input_id


class _Park(Exception):
    """Raised inside a call's handling: this call needs the approval gate first."""

    traced_as_error = False  # the call waits for a person: no failure (executions.engine.tracing)

    def __init__(self, tool: Tool, call: ToolCall, effect: Effect, proposed: JSON | None, reopen: bool) -> None:
        self.tool, self.call, self.effect, self.proposed, self.reopen = tool, call, effect, proposed, reopen


class _Visit:
    """One visit of an agent step under a lease (``executions.agent.replaying`` runs it
    again, read only, for ``keel replay``)."""

    def __init__(self, lease: Lease | None, ctx: StepContext, workflow: Workflow, step: Step, model=None) -> None:
        self.lease, self.ctx, self.workflow, self.step = lease, ctx, workflow, step
        spec = step.agent  # a framework's agent (executions.agent.foreign) is one too
        assert spec is not None, "an agent step declares its spec"
        self.spec = spec
        self.execution = ctx.execution
        self.slot = f"{step.name}:r{self.execution.round}"
        saved = self.execution.context.get("agents", {}).get(self.slot, {})
        self.results: dict[str, JSON] = dict(saved.get("results", {}))  # call id → {tool, content, is_error}
        self.unsaved: set[str] = set()
        self.performed: dict[str, JSON] = {}  # ledger key → receipt, of the effects this visit sent or found
        self.progress: dict[str, JSON] = {}
        self.messages: list[JSON] = [{"role": "user", "content": self.spec.instruction(ctx)}]
        self.proposals: list[JSON] = []
        self.refusals = 0
        self.compactions: list[JSON] = list(saved.get("compactions", []))  # journalled folds (compaction)
        self.unsaved_compactions: list[JSON] = []
        self.call_keys: dict[str, str] = {}  # tool call id → the model call that proposed it
        self.started = time.monotonic()
        self.model = model or JournaledModel(
            get_model_client(), lease=self._leased, execution=self.execution, step=step.name
        )

    @property
    def _leased(self) -> Lease:
        """The lease the visit runs under: a worker's has one; a replay's has none and
        answers from the record wherever one would be needed."""
        assert self.lease is not None, "a replay visits without a lease and writes nothing"
        return self.lease

    # --- the loop

    def run(self) -> kinds.Done | kinds.Parked:
        while True:
            response = self._ask(self._request())
            key = self.model.keys[-1]
            if not response.tool_calls:
                return self._finish(response.text or None)
            self.messages.append(
                {
                    "role": "assistant",
                    "content": response.text,
                    "tool_calls": [c.as_dict() for c in response.tool_calls],
                }
            )
            for index, call in enumerate(response.tool_calls):
                try:
                    content, is_error = self._handle(call, key=key, index=index)
                except _Park as park:
                    self._park(park)
                    return kinds.Parked()
                except InputNeeded as asked:
                    self._wait_for_input(asked)
                    return kinds.Parked()
                self.messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "name": call.name,
                        "content": json.dumps(content, sort_keys=True),
                        "is_error": is_error,
                    }
                )

    def _ask(self, request: ModelRequest) -> ModelResponse:
        """One model call through the journal, within the budget; the tool calls it proposes
        are keyed by it, and its text becomes a hypothesis."""
        self._check_budget()
        response = self.model.ask(request, also=self._save)
        key = self.model.keys[-1]
        self.call_keys.update({c.id: key for c in response.tool_calls})
        self.ctx.add_hypothesis(response.text, source=key)
        return response

    def _compact(self) -> None:
        """Before the next call: apply the fold journalled for it, or fold now when the
        round's conversation passes its budget (executions.agent.compaction)."""
        budget = compaction.threshold(self.model.name, self.spec.budget.conversation_tokens)
        if budget is None:
            return
        before = self.model.seq + 1
        record = next((c for c in self.compactions if c["before_call"] == before), None)
        if record is None:
            if compaction.tokens(self.messages) <= budget:
                return
            record = compaction.fold(self.messages, keys=self.call_keys, before_call=before)
            if record is None:
                return
            self.compactions.append(record)
            self.unsaved_compactions.append(record)
        self.messages = compaction.apply(self.messages, record)

    def _request(self) -> ModelRequest:
        self._compact()
        allowed = self._allowed()
        system = self.ctx.prompt(
            "Resolve the task with the tools you may use now; answer without a tool call when done.",
            tools=tuple((t.name, t.description) for t in allowed),
            budget_tokens=self.spec.budget.context_tokens,
        )
        return ModelRequest(
            prompt_id=self.spec.prompt_id,
            prompt_version=self.step.prompt_version,
            system=system,
            messages=tuple(self.messages),
            tools=tuple(t.spec for t in allowed),
            offline_policy=self.spec.offline_policy,
        )

    def _allowed(self) -> list[Tool]:
        progress = self._progress()
        return [t for t in self.spec.tools if not t.why_not(progress)]

    def _progress(self) -> Progress:
        return Progress(input=self.ctx.input, results=dict(self.progress))

    def _finish(self, answer: Any) -> kinds.Done:
        """The visit's output: the final ``answer`` (text, or a framework's structured
        output as JSON) and every proposed call."""
        done_when = self.spec.done_when
        if done_when is not None and not done_when(self._progress()):
            shown = answer if isinstance(answer, str) else json.dumps(answer, sort_keys=True, default=str)
            raise NeedsAttention(
                f"the model stopped before the task was done: {(shown or '')[:300]}",
                code=StuckReason.STEP_ERROR,
                evidence={"answer": (shown or "")[:2000], "tool_calls": self.proposals},
            )
        return kinds.Done(
            {
                "answer": answer,
                # Each proposed call, as the workflow's next steps read it (docs/design.md §6): the
                # arguments it ran with, done/refused/failed, and what it returned.
                "calls": [
                    {
                        "tool": p["tool"],
                        "args": p.get("effective_args", p["args"]),
                        "status": p["outcome"] or "failed",
                        "result": p.get("result"),
                    }
                    for p in self.proposals
                ],
                "tool_calls": self.proposals,
                "model_calls": self.model.summary(),
            }
        )

    # --- one proposal

    def _handle(self, call: ToolCall, *, key: str, index: int) -> tuple[JSON, bool]:
        """Decide one proposed call (refuse, read, send through the ledger, park at its
        approval); a question its provider asks a person is answered from the record, or
        raises InputNeeded (the execution waits for the answer)."""

        asked_as = f"{key}:{call.name}" + (f":{index}" if index else "")
        answers = dict(  # read here: a provider's question may come on its client's event loop
            Question.objects.filter(
                execution_id=self.execution.pk, step=self.step.name, status=Question.State.ANSWERED
            ).values_list("input_id", "answer")
        )

        def ask(question: str, message: str, schema: Any) -> Any:
            input_id = f"{asked_as}:{question}"
            if len(input_id) > INPUT_ID_MAX:  # a long step or tool name: the same id, shorter
                input_id = f"{self.execution.ref}:{hashlib.sha256(input_id.encode()).hexdigest()}"
            if input_id not in answers:
                raise InputNeeded(input_id=input_id, tool=call.name, message=message, schema=schema)
            return answers[input_id]

        with (
            tracing.span(
                f"execute_tool {call.name}",
                self.execution,
                **{
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": call.name,
                    "gen_ai.tool.call.id": call.id,
                },
            ) as span,
            foreign.asking(ask),
            foreign.in_step(self.ctx),  # in_step: what an author's key_fn reads
        ):
            content, is_error = self._decide(call, key=key, index=index)
            if is_error:
                span.set_attribute("error.type", "tool_error")
            return content, is_error

    def _decide(self, call: ToolCall, *, key: str, index: int) -> tuple[JSON, bool]:
        tool = self.spec.tool(call.name)
        progress = self._progress()
        proposal = {"call": key, "tool": call.name, "args": call.args, "outcome": ""}
        self.proposals.append(proposal)
        try:
            if tool is None:
                raise Refused(f"there is no tool {call.name!r}")
            why_not = tool.why_not(progress)
            if why_not:
                raise Refused(f"{call.name} is not allowed now: {why_not}")
            args = tool.effective_args(call.args, progress)
        except Refused as refused:
            proposal["outcome"] = "refused"
            return self._refuse(call, key=key, reason=str(refused)), True
        proposal["effective_args"] = args
        if not tool.effect:
            content, is_error = self._read(tool, call, args)
        else:
            content, is_error = self._effect(tool, call, args, key=key, index=index)
        proposal["outcome"] = "failed" if is_error else "done"
        proposal["result"] = content
        if not is_error:
            self.progress[tool.name] = content
            self._verified(tool, call, args, content, key=key, index=index)
        return content, is_error

    def _refuse(self, call: ToolCall, *, key: str, reason: str) -> JSON:
        """Record the refusal once (a replay refuses the same call again without a new
        event) and answer it to the model; too many refusals stop the step."""
        self.refusals += 1
        recorded = ExecutionEvent.objects.filter(
            execution_id=self._leased.execution_id, type="tool_call.refused", payload__call=key, payload__id=call.id
        ).exists()
        if not recorded:
            with transaction.atomic():
                fence(self._leased)
                execution = Execution.objects.get(pk=self._leased.execution_id)
                lifecycle.record(
                    execution,
                    "tool_call.refused",
                    step=self.step.name,
                    actor_label=self._leased.owner,
                    payload={"call": key, "id": call.id, "tool": call.name, "args": call.args, "reason": reason},
                )
        if self.refusals > self.spec.budget.max_refusals:
            raise BudgetExceeded(
                f"{self.refusals} proposals refused (at most {self.spec.budget.max_refusals}); last: {reason}",
                evidence={"tool_calls": self.proposals},
            )
        return {"error": f"refused: {reason}"}

    def _read(self, tool: Tool, call: ToolCall, args: JSON) -> tuple[JSON, bool]:
        recorded = self.results.get(call.id)
        if recorded is not None:
            return recorded["content"], recorded["is_error"]
        try:
            with call_timeout(self.step.retry.timeout):
                content, is_error = redact(tool.run(args, self._progress())), False
        except StepFailure as failure:
            if failure.kind not in TOLD_TO_THE_MODEL:
                raise
            content, is_error = {"error": failure.message}, True
        self.results[call.id] = {"tool": tool.name, "args": args, "content": content, "is_error": is_error}
        self.unsaved.add(call.id)
        return content, is_error

    def _effect(self, tool: Tool, call: ToolCall, args: JSON, *, key: str, index: int) -> tuple[JSON, bool]:
        recorded = self.results.get(call.id)  # a refusal by the provider, told to the model before
        if recorded is not None:
            return recorded["content"], recorded["is_error"]
        effect = tool.run(args, self._progress(), f"{key}:{tool.name}" + (f":{index}" if index else ""))
        grant = ""
        if tool.needs_approval:
            effect, grant = self._approved(tool, call, args, effect)
        if effect.key in self.performed:  # proposed again in this visit: the receipt just recorded
            return self.performed[effect.key], False
        return self._send(tool, call, args, effect, grant)

    def _send(self, tool: Tool, call: ToolCall, args: JSON, effect: Effect, grant: str) -> tuple[JSON, bool]:
        """Through the ledger (the recorded receipt when it is done already); the receipt,
        or a provider's refusal told to the model."""
        try:
            with call_timeout(self.step.retry.timeout):
                action, receipt = ledger.perform(
                    lease=self._leased, step=self.step.name, action_type=tool.name, effect=effect, gate_ref=grant
                )
        except StepFailure as failure:
            if failure.kind not in TOLD_TO_THE_MODEL:
                raise
            self.results[call.id] = {
                "tool": tool.name,
                "args": args,
                "content": {"error": failure.message},
                "is_error": True,
            }
            self.unsaved.add(call.id)
            return {"error": failure.message}, True
        self._record_receipt(action, receipt)
        self.performed[effect.key] = receipt
        return receipt, False

    def _record_receipt(self, action: Action, receipt: JSON) -> None:
        """The effect's outcome, committed with its ledger row at once (fenced): nothing after
        it — a budget's stop, a crash before the next call — can leave the action
        ``executing`` while the provider acted."""
        with transaction.atomic():
            fence(self._leased)
            execution = Execution.objects.get(pk=self._leased.execution_id)
            ledger.mark_succeeded(
                Action.objects.get(pk=action.pk), receipt, execution=execution, actor_label=self._leased.owner
            )

    def _approved(self, tool: Tool, call: ToolCall, args: JSON, effect: Effect) -> tuple[Effect, str]:
        """Pass only with an approval of exactly these arguments (found by their document's
        sha256, in any round), else park (first ask, or this round asked about another call
        or lapsed: a new round) or stop for a person. Returns the effect keyed by the
        approval and the tool (``grant_key``) and the grant: every proposal of the approved
        call — the model's repeat, a retry's, a resume's — is the same ledger action, so
        the approval is spent by one effect and a repeat gets the recorded receipt."""
        gate_step = self._gate_step(tool)
        gate = gates.get(_approval(tool).kind)
        subject = hashlib.sha256(tool_call_document(tool.name, effect.args)).hexdigest()
        outcome = gate.visit_subject(self.execution, gate_step, subject)
        if outcome is None or isinstance(outcome, gates.Reopen):
            raise _Park(tool, call, effect, call.args, reopen=outcome is not None)
        if isinstance(outcome, gates.Attention):
            raise NeedsAttention(outcome.reason, code=outcome.code)
        view = copy.copy(self.execution)  # the gate reads its own outcome as the step's output
        view.show_outputs({**self.ctx.state, self.step.name: outcome.output})
        grant = gate.grant_ref(view, gate_step)
        effect = tool.run(args, self._progress(), grant_key(self.execution.ref, grant, tool.name))
        running = hashlib.sha256(tool_call_document(tool.name, effect.args)).hexdigest()
        if running != subject:
            raise StepFailure(
                FailureKind.PERMISSION,
                f"{tool.name}: the arguments about to run ({running[:12]}) are not the approved ones ({subject[:12]})",
                evidence={"approved_sha256": subject, "running_sha256": running, "args": effect.args},
            )
        spent = effect.key in self.performed
        if not spent and not Action.objects.filter(key=effect.key, status=Action.State.SUCCEEDED).exists():
            gate.check_effect(view, self.workflow, gate_step, effect)  # nothing is sent for a spent one
        return effect, grant

    def _gate_step(self, tool: Tool) -> Step:
        approval = _approval(tool)
        return Step(name=self.step.name, label=self.step.label, kind=approval.kind, spec=approval)

    def _verified(self, tool: Tool, call: ToolCall, args: JSON, content: JSON, *, key: str, index: int) -> None:
        statement = tool.fact(args, content) if tool.fact is not None else None
        if not statement:
            shown = json.dumps(content, sort_keys=True, ensure_ascii=False)
            statement = f"{tool.name}({json.dumps(args, sort_keys=True)}) returned {shown[:500]}"
        seq = key.rsplit(":c", 1)[-1]
        self.ctx.add_facts(
            [
                {
                    "id": f"R{self.execution.round}C{seq}" + (f"-{index + 1}" if index else ""),
                    "statement": statement,
                    "source": f"{'receipt' if tool.effect else 'result'} of {tool.name}, call {key}",
                }
            ]
        )

    # --- budgets

    def _check_budget(self) -> None:
        budget = self.spec.budget
        calls = self.model.seq
        why = ""
        if calls >= budget.max_calls:
            why = f"{calls} model calls made (at most {budget.max_calls})"
        elif self.model.tokens >= budget.max_tokens:
            why = f"{self.model.tokens} tokens used (at most {budget.max_tokens})"
        elif time.monotonic() - self.started >= budget.max_seconds:
            why = f"worked {time.monotonic() - self.started:.0f} s (at most {budget.max_seconds:g} s)"
        elif budget.max_cost is not None:
            spent = (
                ModelCall.objects.filter(
                    execution_id=self._leased.execution_id, step=self.step.name, round=self.execution.round
                ).aggregate(c=Sum("cost"))["c"]
                or 0
            )
            if spent >= budget.max_cost:
                why = f"cost {spent} spent (at most {budget.max_cost})"
        if why:
            raise BudgetExceeded(f"budget spent: {why}", evidence={"tool_calls": self.proposals})

    # --- commits

    def _save(self, execution: Execution) -> None:
        """Inside the transaction that records a new model call: the tools' results and the
        folds gathered since the last one (an effect's receipt is committed at once)."""
        if not self.unsaved and not self.unsaved_compactions:
            return
        state = execution.context
        slot = state.setdefault("agents", {}).setdefault(self.slot, {"results": {}})
        slot.setdefault("results", {})
        for record in self.unsaved_compactions:  # the fold that shaped the call this commit records
            slot["compactions"] = [*slot.get("compactions", []), record]
            lifecycle.record(
                execution,
                "context.compacted",
                step=self.step.name,
                actor_label=self._leased.owner,
                payload={"call": call_key(execution, self.step.name, record["before_call"]), **record},
            )
        self.unsaved_compactions = []
        for call_id in sorted(self.unsaved):
            result = self.results[call_id]
            slot["results"][call_id] = result
            # On the timeline too: what the agent read (or was refused by a provider), when.
            lifecycle.record(
                execution,
                "tool_call.result",
                step=self.step.name,
                actor_label=self._leased.owner,
                payload={
                    "id": call_id,
                    "tool": result["tool"],
                    "args": result.get("args"),
                    "is_error": result["is_error"],
                    "result": _shown(result["content"]),
                },
            )
        execution.context = state
        execution.save(update_fields=["context", "updated_at"])
        self.unsaved = set()

    def _wait_for_input(self, asked: InputNeeded) -> None:
        """One commit (``parking.park``): what was verified so far, the question opened at
        the input gate, the execution waiting (no worker held). The call it interrupted did
        nothing; it is made again, from the journal, once someone answers."""

        def prepare(execution: Execution) -> tuple[str, ...]:
            self._save(execution)
            return ()

        parking.park(
            self._leased,
            gate=gates.get(asked.gate),
            step=Step(name=self.step.name, label=self.step.label, kind=asked.gate, spec=asked),
            workflow=self.workflow,
            reopen=False,
            prepare=prepare,
            payload={"tool": asked.tool, "schema": asked.schema},
        )

    def _park(self, park: _Park) -> None:
        """One commit (``parking.park``): what was verified so far, the effective
        arguments as an artifact version, the gate opened on that version, the effect
        planned under it, and the execution parked (the worker lets it go)."""
        tool, effect = park.tool, park.effect
        approval = _approval(tool)
        blob = store.put(tool_call_document(tool.name, effect.args))

        def prepare(execution: Execution) -> tuple[str, ...]:
            self._save(execution)
            execution.refresh_from_db(fields=["context"])
            version = artifact_version_create(
                execution=execution,
                kind=TOOL_CALL_ARTIFACT_KIND,
                title=f"{tool.name}: the arguments that will run",
                blob=blob,
                content_type="application/json",
                step=self.step.name,
                round=execution.round,
            )
            gates.new_version(version, actor_label=self._leased.owner)
            # The notes stay as they were: the step's facts are committed when it completes,
            # so its prompts rebuild identically when it runs again after the decision.
            state = execution.context
            # The approval gate's spec (approvals.gate.Approval, above this room) names the artifact.
            state.setdefault("artifacts", {})[approval.artifact] = version.as_ref()  # type: ignore[attr-defined]
            execution.context = state
            return ("context",)

        planned = Step(name=self.step.name, label=self.step.label, kind=StepKind.EFFECT, action=tool.name)
        ref = self.execution.ref
        parking.park(
            self._leased,
            gate=gates.get(approval.kind),
            step=self._gate_step(tool),
            workflow=self.workflow,
            reopen=park.reopen,
            effects=lambda grant: [(planned, replace(effect, key=grant_key(ref, grant, tool.name)))],
            prepare=prepare,
            payload={"tool": tool.name, "proposed_args": park.proposed, "effective_args": effect.args},
        )


def _approval(tool: Tool) -> GateSpec:
    """The gate a tool that needs approval is bound to."""
    approval = tool.approval
    assert approval is not None, "only a tool that needs approval is asked for one"
    return approval
