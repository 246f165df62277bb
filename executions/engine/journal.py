"""The model-call journal: every model call answered once, recorded before the step goes on.

A step's calls are numbered in order; call n of step s in round r of execution E has
the key ``E:s:r{r}:c{n}``, sent to the provider as ``X-Model-Call-Key``. ``ask``:

1. looks the key up (its latest revision). Recorded with the same request sha256 →
   the recorded answer, no network. Recorded with another sha256 → ``ModelDrift`` (the
   runner sends the execution to needs_attention ``model_drift``, with both requests
   as evidence): never a silent re-call or reuse — unless an operator accepted the new
   request (``triage.drift``, an audited ``operator.accept_request`` event): for
   exactly that rebuilt request of that call, or for an earlier call of the same step
   and round accepted after this one was recorded (a conversation that changed at call
   k changes every call after it). Then the call is asked again and recorded as the
   key's next revision, superseding the old row, which is kept.
2. otherwise asks the client, then inserts the row in a fenced transaction (the
   caller may add its own writes to that commit with ``also``), so a crash re-asks at
   most the call that was in flight.

Before a call is asked its worst case is reserved against the execution's budget and
every ancestor's (``executions.engine.costs``: BudgetExceeded, and no call, when it
doesn't fit); the row records the call's cost from its usage and the price table, which
settles the reservation. A replayed call is neither reserved nor charged again.

The request hashed is ``ModelRequest.canonical``: model, prompt id and version,
system text, messages, tools, parameters. A revision after the first is sent to the
provider as ``{key}:rev{n}``, so a provider that de-duplicates on the key asks anew.

What a provider answers is outside data: it is redacted before anything reads it
(executions.redaction), and checked before it is stored — text and tool calls the
database can hold (no NUL, no lone surrogate), token counts within an integer column,
model, id and finish reason within theirs. An answer that fails is not recorded: the
call is a transient failure whose evidence is the answer as received (escaped,
redacted, at most ``EVIDENCE_CHARS``), and the step's retry policy asks again. The
stored request is redacted too, while its sha256 stays the hash of what was sent, so a
replay compares the request it rebuilds with the one the provider got.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

from django.db import transaction

from ..authoring.modelcalls import ModelClient, ModelRequest, ModelResponse, ToolCall, canonical_json
from ..errors import FailureKind, NeedsAttention, StepFailure
from ..models import Execution, ExecutionEvent, ModelCall, Status
from ..reasons import StuckReason
from ..redaction import redact
from ..storable import DB_INT_MAX, json_refusal, text_refusal
from . import costs, failpoints, lifecycle, tracing
from .leases import ExecutionStopped, Lease, fence

EVIDENCE_CHARS = 2000


class ModelDrift(NeedsAttention):
    """A recorded call no longer matches the request rebuilt on replay."""

    code = StuckReason.MODEL_DRIFT

    def __init__(self, key: str, recorded: str, rebuilt: str, rebuilt_request: dict[str, Any] | None = None) -> None:
        super().__init__(
            f"model call {key} was recorded with request {recorded[:12]} but the request rebuilt now is "
            f"{rebuilt[:12]} (a prompt, tool or parameter changed); not asking again, not reusing it",
            evidence={
                "key": key,
                "recorded_sha256": recorded,
                "rebuilt_sha256": rebuilt,
                # What would be sent now, for the operator's diff and decision (accept_request).
                **({"rebuilt_request": rebuilt_request} if rebuilt_request is not None else {}),
            },
        )
        self.key = key


ACCEPTED = "operator.accept_request"


def accepted(execution_id: int, key: str, recorded: str, rebuilt: str) -> bool:
    """An operator accepted the request rebuilt as ``rebuilt`` for call ``key`` recorded
    as ``recorded`` (triage.drift): exactly those, nothing else."""
    return ExecutionEvent.objects.filter(
        execution_id=execution_id,
        type=ACCEPTED,
        payload__key=key,
        payload__recorded_sha256=recorded,
        payload__rebuilt_sha256=rebuilt,
    ).exists()


def _asked_again(execution_id: int, row: ModelCall, rebuilt: str) -> bool:
    """Whether the recorded call ``row``, rebuilt now as ``rebuilt``, is to be asked again:
    its own new request was accepted, or an earlier call of its step and round was
    accepted after ``row`` was recorded (so ``row`` answered a conversation that changed)."""
    if accepted(execution_id, row.key, row.request_sha256, rebuilt):
        return True
    return ExecutionEvent.objects.filter(
        execution_id=execution_id,
        type=ACCEPTED,
        payload__step=row.step,
        payload__round=row.round,
        payload__seq__lt=row.seq,
        created_at__gt=row.created_at,
    ).exists()


def call_key(execution: Execution, step: str, seq: int) -> str:
    return f"{execution.ref}:{step}:r{execution.round}:c{seq}"


class JournaledModel:
    """What a model or agent step calls: the client, behind the journal."""

    def __init__(self, client: ModelClient, *, lease: Lease, execution: Execution, step: str) -> None:
        self.client = client
        self.lease = lease
        self.execution = execution
        self.step = step
        self.seq = 0
        self.keys: list[str] = []
        self.prompt_versions: list[str] = []  # of each call, in the order of ``keys``
        self.asked: list[str] = []  # keys answered by the provider in this run (not from the journal)
        self.tokens = 0

    @property
    def name(self) -> str:
        return self.client.model

    @property
    def label(self) -> str:
        return self.client.label

    def ask(self, request: ModelRequest, *, also: Callable[[Execution], None] | None = None) -> ModelResponse:
        """The answer to the next call of this step (see the module docstring).

        ``also(execution)`` runs inside the transaction that records a new call (not for
        a replayed one). Raises ModelDrift, StepFailure (the client's), LeaseLost, and
        ExecutionStopped when the execution stopped running while the call was out.
        """
        self.seq += 1
        key = call_key(self.execution, self.step, self.seq)
        self.keys.append(key)
        self.prompt_versions.append(request.prompt_version)
        canonical = request.canonical(model=self.client.model)
        sha = hashlib.sha256(canonical_json(canonical)).hexdigest()
        recorded = ModelCall.objects.filter(key=key).order_by("-revision").first()
        revision, supersedes = 1, None
        if recorded is not None:
            if recorded.request_sha256 == sha:
                self.tokens += recorded.input_tokens + recorded.output_tokens
                return response_of(recorded)
            if not _asked_again(self.lease.execution_id, recorded, sha):
                raise ModelDrift(key, recorded.request_sha256, sha, canonical)
            revision, supersedes = recorded.revision + 1, recorded  # asked again, as the operator accepted
        # The worst case against every budget above (executions.engine.costs): BudgetExceeded, no call.
        worst = costs.worst_case(model=self.client.model, canonical=canonical, max_tokens=request.max_tokens)
        held = costs.reserve(self.lease, execution=self.execution, key=key, revision=revision, amount=worst)
        failpoints.hit(f"before_model_call:{self.step}:c{self.seq}")
        started = time.monotonic()
        sent_key = key if revision == 1 else f"{key}:rev{revision}"
        with tracing.span(
            f"chat {self.client.model}",
            self.execution,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": self.client.provider,
                "gen_ai.request.model": self.client.model,
                "keel.model_call.key": sent_key,
                "gen_ai.input.messages": tracing.content_attribute(lambda: canonical),
            },
        ) as span:
            response = _checked(self.client, _redacted(self.client.complete(request, call_key=sent_key)))
            span.set_attribute("gen_ai.response.model", response.model)
            span.set_attribute("gen_ai.usage.input_tokens", response.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.output_tokens)
            span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason or ""])
            answered = tracing.content_attribute(
                lambda: {"text": response.text, "tool_calls": [c.as_dict() for c in response.tool_calls]}
            )
            if answered is not None:
                span.set_attribute("gen_ai.output.messages", answered)
        latency_ms = min(int((time.monotonic() - started) * 1000), DB_INT_MAX)
        failpoints.hit(f"after_model_call:{self.step}:c{self.seq}")  # answered, not yet recorded
        reported = costs.cost_usd(
            model=self.client.model,
            returned=response.model,
            input_tokens=response.input_tokens,
            output_tokens=response.output_tokens,
        )
        overran = held and costs.overrun(reported, worst)
        with transaction.atomic():
            fence(self.lease)
            execution = Execution.objects.get(pk=self.lease.execution_id)
            if also is not None:
                also(execution)
            ModelCall.objects.create(
                key=key,
                revision=revision,
                supersedes=supersedes,
                execution_id=self.lease.execution_id,
                step=self.step,
                round=self.execution.round,
                seq=self.seq,
                provider=self.client.provider,
                adapter=f"{type(self.client).__module__}.{type(self.client).__name__}",
                model=self.client.model,
                model_returned=response.model,
                prompt_id=request.prompt_id,
                prompt_version=request.prompt_version,
                request_sha256=sha,
                request=redact(canonical),  # the hash above is of what was sent
                response={"text": response.text, "tool_calls": [c.as_dict() for c in response.tool_calls]},
                finish_reason=response.finish_reason,
                input_tokens=response.input_tokens,
                output_tokens=response.output_tokens,
                latency_ms=latency_ms,
                cost=min(reported, costs.COST_MAX) if reported is not None else None,
                response_id=response.response_id,
                worker=self.lease.owner,
                lease_token=self.lease.token,
            )
            if overran or (reported is not None and reported > costs.COST_MAX):
                lifecycle.record(
                    execution,
                    "model_call.overrun",
                    step=self.step,
                    actor_label=self.lease.owner,
                    payload={
                        "key": key,
                        "reserved_usd": str(worst) if worst is not None else None,
                        "reported_usd": str(reported),
                        "input_tokens": response.input_tokens,
                        "output_tokens": response.output_tokens,
                    },
                )
        self.asked.append(key)
        self.tokens += response.input_tokens + response.output_tokens
        if overran:
            raise costs.BudgetExceeded(
                f"{self.client.provider} reported usage costing ${reported} for {key}, past the ${worst} its "
                f"budget reserved for it ({response.input_tokens} tokens in, {response.output_tokens} out); the "
                "call is recorded as reported and nothing more is asked — check the provider's usage, raise the "
                "budget, then resume",
                evidence={"key": key, "reserved_usd": str(worst), "reported_usd": str(reported)},
            )
        if execution.status != Status.RUNNING:  # cancelled meanwhile: recorded, and no further step work
            raise ExecutionStopped(f"{execution.ref} is {execution.status}; not going on after {key}")
        return response

    def complete(self, *, prompt: str, prompt_version: str, prompt_id: str = "") -> ModelResponse:
        """A one-message call: ``prompt`` (built with ``ctx.prompt``) as the user's turn."""
        request = ModelRequest(
            prompt_id=prompt_id or self.step,
            prompt_version=prompt_version,
            system="",
            messages=({"role": "user", "content": prompt},),
        )
        return self.ask(request)

    def summary(self) -> list[dict[str, Any]]:
        """What the step's checkpoint keeps of its calls: the keys, the model and the prompt
        version (the journal has the rest)."""
        return [
            {"key": key, "model": self.client.model, "prompt_version": version}
            for key, version in zip(self.keys, self.prompt_versions, strict=True)
        ]


def _redacted(response: ModelResponse) -> ModelResponse:
    """The answer without configured secrets or credential shapes, before anything reads it."""
    return ModelResponse(
        text=redact(response.text),
        model=response.model,
        tool_calls=tuple(
            ToolCall(id=c.id, name=c.name, args=redact(c.args), raw=redact(c.raw)) for c in response.tool_calls
        ),
        finish_reason=response.finish_reason,
        input_tokens=response.input_tokens,
        output_tokens=response.output_tokens,
        response_id=response.response_id,
    )


# What the journal's columns hold (executions.models.ModelCall).
_BOUNDED = {"model": 200, "response_id": 200, "finish_reason": 40}
_CALL_FIELD_CHARS = 200  # a tool call's id and name


def _checked(client: ModelClient, response: ModelResponse) -> ModelResponse:
    """``response`` if the journal can store it as it is; else a transient StepFailure
    with the answer as evidence (the module docstring)."""
    problem = _problem(response)
    if problem is None:
        return response
    raise StepFailure(
        FailureKind.TRANSIENT,
        f"{client.provider}: unreadable answer ({problem})",
        evidence={"answer": _escaped(response)},
    )


def _problem(response: ModelResponse) -> str | None:
    for name, limit in _BOUNDED.items():
        value = getattr(response, name)
        if not isinstance(value, str):
            return f"{name} is not text"
        reason = text_refusal(value)
        if reason:
            return f"{name} {reason}"
        if len(value) > limit:
            return f"{name} is {len(value)} characters long (at most {limit})"
    for name in ("input_tokens", "output_tokens"):
        value = getattr(response, name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= DB_INT_MAX:
            return f"{name} is {str(value)[:40]!r}, not a count between 0 and {DB_INT_MAX}"
    if not isinstance(response.text, str):
        return "the text is not text"
    reason = text_refusal(response.text)
    if reason:
        return f"the text {reason}"
    for call in response.tool_calls:
        for name in ("id", "name"):
            value = getattr(call, name)
            if not isinstance(value, str) or text_refusal(value) or len(value) > _CALL_FIELD_CHARS:
                return f"a tool call's {name} is not text of at most {_CALL_FIELD_CHARS} characters"
        reason = json_refusal(call.args) if call.args is not None else text_refusal(call.raw or "")
        if reason:
            return f"the arguments of {call.name[:_CALL_FIELD_CHARS]}: {reason}"
    return None


def _escaped(response: ModelResponse) -> str:
    """The answer as text any column can hold: JSON with every non-ASCII character (NUL
    and lone surrogates included) escaped, at most EVIDENCE_CHARS."""
    answer = {
        "text": response.text,
        "model": response.model,
        "id": response.response_id,
        "finish_reason": response.finish_reason,
        "usage": {"input_tokens": response.input_tokens, "output_tokens": response.output_tokens},
        "tool_calls": [{"id": c.id, "name": c.name, "args": c.args, "raw": c.raw} for c in response.tool_calls],
    }
    return json.dumps(answer, ensure_ascii=True, default=repr)[:EVIDENCE_CHARS]


def response_of(row: ModelCall) -> ModelResponse:
    return ModelResponse(
        text=row.response.get("text", ""),
        model=row.model_returned,
        tool_calls=tuple(ToolCall.from_dict(c) for c in row.response.get("tool_calls", [])),
        finish_reason=row.finish_reason,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        response_id=row.response_id,
    )
