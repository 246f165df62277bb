"""The input gate: a tool's provider asked a person something mid-call (an MCP server's
elicitation), and the execution waits for the answer without a worker.

An agent step whose tool call raised ``InputNeeded`` parks here (``parking.park``): a
``Question`` row (its ``input_id`` the same each time the call asks it again, its
message and the JSON Schema an answer must meet), the execution ``waiting`` with
``pending_input`` ``{id, message, schema}``. ``POST /api/executions/{id}/events``
``{type: "input.answer", input_id, answer, event_id}`` (operators, and the user who
started it) answers it exactly once — the same ``event_id`` again answers the same and
changes nothing; an answer the schema refuses is InvalidInput naming ``answer.<field>``
and nothing changes; an input nobody asks now is a Conflict — and wakes the execution:
the step runs again from its journal, the call is made again, and the provider's
question is answered from the row (``answered``).

``Question.status`` changes only in ``_close``, with its event, in the caller's transaction.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pydantic
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from . import acts
from .authoring.tools import SchemaArgs
from .authoring.workflow import Step, Workflow
from .engine import dispatch, events, gates, lifecycle
from .errors import Conflict, Forbidden, InputNeeded, InvalidInput
from .models import OPERATE, Execution, Question, Status, execution_for
from .storable import STORABLE_JSON

KIND = "input"


class InputGate(gates.Gate):
    kind = KIND

    def open(self, execution: Execution, step: Step, workflow: Workflow, *, actor_label: str) -> gates.Opened:
        asked = step.spec
        assert isinstance(asked, InputNeeded), "the input gate opens on a tool's question"
        stale = Question.objects.select_for_update().filter(execution=execution, status=Question.State.OPEN)
        for other in stale.exclude(input_id=asked.input_id):  # asked before, never answered, not asked now
            _close(other, "withdraw", execution, actor_label=actor_label, reason="a new question replaced it")
        question, created = Question.objects.get_or_create(
            execution=execution,
            input_id=asked.input_id,
            defaults={
                "step": step.name,
                "round": execution.round,
                "tool": asked.tool,
                "message": asked.message,
                "schema": asked.schema or {},
            },
        )
        if not created and question.status != Question.State.OPEN:  # answered, yet asked again: a new question
            raise Conflict(f"{asked.tool} asked {asked.input_id} again after it was {question.status}")
        return gates.Opened(
            transition="wait",
            ref=f"question:{question.pk}",
            event="input.requested",
            payload={"input_id": question.input_id, "tool": question.tool, "message": question.message},
        )

    def withdraw(self, execution: Execution, *, actor, actor_label: str, reason: str) -> dict:
        withdrawn = []
        for question in Question.objects.select_for_update().filter(execution=execution, status=Question.State.OPEN):
            _close(question, "withdraw", execution, actor=actor, actor_label=actor_label, reason=reason)
            withdrawn.append(question.input_id)
        return {"withdrawn_inputs": withdrawn} if withdrawn else {}

    def holding(self) -> Q:
        return Q(Exists(Question.objects.filter(execution=OuterRef("pk"), status=Question.State.OPEN)))

    def pending(self, execution: Execution) -> gates.PendingGate | None:
        return self.pending_many([execution]).get(execution.pk)

    def pending_many(self, executions: list[Execution]) -> dict[int, gates.PendingGate]:
        """The question each execution waits at: open, asked at the step it is at."""
        found: dict[int, gates.PendingGate] = {}
        at = {e.pk: e.current_step for e in executions if e.status == Status.WAITING}
        for question in Question.objects.filter(execution__in=list(at), status=Question.State.OPEN).order_by("-id"):
            if question.step == at[question.execution_id]:
                found.setdefault(question.execution_id, _pending(question))
        return found


def _pending(question: Question) -> gates.PendingGate:
    return gates.PendingGate(
        kind=KIND,
        step=question.step,
        ref=f"question:{question.pk}",
        waiting_for=f"an answer to {question.tool}'s question: {question.message}",
        since=question.opened_at,
        until=None,
        details={"id": question.input_id, "message": question.message, "schema": question.schema},
    )


def pending_question(execution: Execution, input_id: str) -> Question | None:
    """The open question ``input_id`` of ``execution``, if it asks it now."""
    return Question.objects.filter(execution=execution, input_id=input_id, status=Question.State.OPEN).first()


def answer_deliver(*, ref: str, user: AbstractBaseUser, input_id: str, answer: Any, event_id: str) -> dict[str, str]:
    """Answer the question ``input_id`` execution ``ref`` waits at: operators and the user
    who started it. Wakes it exactly once; the same ``event_id`` again answers the same
    body and changes nothing. Raises Forbidden, NotFound, Conflict (nothing asked under
    that id now, or the event_id was used for another answer), InvalidInput (the schema)."""
    execution = execution_for(ref)
    if not (user.has_perm(OPERATE) or execution.created_by_id == user.pk):
        raise Forbidden("only operators or the user who started it may answer its questions")
    if execution.created_by_id != user.pk:  # the starter answers their own; others operate it
        acts.require(user, "operate", execution.workflow)
    replayed = _replay(event_id, execution, input_id)
    if replayed is not None:
        return replayed
    with transaction.atomic():
        execution = Execution.objects.select_for_update(no_key=True).get(pk=execution.pk)
        replayed = _replay(event_id, execution, input_id)  # the same post, raced in
        if replayed is not None:
            return replayed
        question = (
            Question.objects.select_for_update()
            .filter(execution=execution, input_id=input_id, status=Question.State.OPEN)
            .first()
        )
        if execution.status != Status.WAITING or question is None or question.step != execution.current_step:
            raise Conflict(_not_asked(execution, input_id), status=execution.status)
        try:
            problems = SchemaArgs(question.schema).problems(answer)
        except Exception:  # a schema the server sent that no answer can meet (keel asks only drawable ones)
            raise Conflict(
                f"{execution.ref}'s question {input_id} has a schema keel can't check answers against"
            ) from None
        if problems:
            (path, why), *more = problems
            raise InvalidInput(
                f"answer.{path}" if path else "answer",
                why,
                more=[(f"answer.{p}" if p else "answer", w) for p, w in more],
            )
        _close(question, "receive", execution, actor=user, answer=answer, event_id=event_id, answered_by=user)
        lifecycle.apply(execution, "wake", actor=user, payload={"input_id": input_id, "event_id": event_id})
        question.execution_status = execution.status
        question.save(update_fields=["execution_status"])
        dispatch.dispatch_on_commit(execution.pk)
    return {"event_id": event_id, "execution_status": execution.status}


def _replay(event_id: str, execution: Execution, input_id: str) -> dict[str, str] | None:
    previous = Question.objects.filter(execution=execution, event_id=event_id).first()  # ids are per execution
    if previous is None:
        return None
    if previous.input_id != input_id:
        raise Conflict(f"event_id {event_id} was already used to answer another question of {execution.ref}")
    return {"event_id": event_id, "execution_status": previous.execution_status}


def _not_asked(execution: Execution, input_id: str) -> str:
    question = Question.objects.filter(execution=execution, input_id=input_id).first()
    if question is not None and question.status != Question.State.OPEN:
        return f"{execution.ref}'s question {input_id} was already {question.status}"
    open_one = Question.objects.filter(execution=execution, status=Question.State.OPEN).first()
    if open_one is not None:
        return f"{execution.ref} asks nothing under {input_id} (it waits for an answer to {open_one.input_id})"
    return f"{execution.ref} is {execution.status} and asks nobody for input"


def _close(
    question: Question,
    transition: str,
    execution: Execution,
    *,
    actor: AbstractBaseUser | None = None,
    actor_label: str = "",
    reason: str = "",
    **fields: Any,
) -> None:
    """The one writer of ``Question.status``: apply ``transition``, save, append the event."""
    getattr(question, transition)()
    question.closed_at = timezone.now()
    for name, value in fields.items():
        setattr(question, name, value)
    question.save(update_fields=["status", "closed_at", *fields])
    lifecycle.record(
        execution,
        f"input.{question.status}",
        step=question.step,
        actor=actor,
        actor_label=actor_label,
        payload={
            "input_id": question.input_id,
            "tool": question.tool,
            **({"answer": question.answer} if question.status == Question.State.ANSWERED else {}),
            **({"reason": reason} if reason else {}),
            **({"event_id": question.event_id} if question.event_id else {}),
        },
    )


# --- the answer, as an event type of ``POST …/events`` (executions.engine.events)


class AnswerEventIn(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")  # a field it does not declare: 422 naming it

    type: Literal["input.answer"]
    input_id: str = pydantic.Field(min_length=1, max_length=300)
    answer: Annotated[Any, STORABLE_JSON] = pydantic.Field(
        description="JSON meeting the question's schema (pending_input.schema)"
    )
    event_id: events.EventId


class AnswerOut(pydantic.BaseModel):
    event_id: str
    execution_status: str


def _deliver(*, ref: str, user: AbstractBaseUser, body: AnswerEventIn) -> dict[str, str]:
    return answer_deliver(ref=ref, user=user, input_id=body.input_id, answer=body.answer, event_id=body.event_id)


gates.register(InputGate())
events.register(
    events.EventType(
        name="input.answer",
        body=AnswerEventIn,
        answer=AnswerOut,
        handle=_deliver,
        summary="the answer to a question a tool's provider asked mid-call (pending_input; operators, and the "
        "user who started it); an input nobody asks now is a 409",
    )
)
