"""What the API and the screens accept: one set of input types, checked at the edge.

PostgreSQL text and JSON can't hold NUL, psycopg can't send a lone surrogate, and our
integer columns stop at 2**31-1. Every body, query string, path parameter and form
value goes through these types, so such a value is a 422 naming the field (a message
on a screen) before anything reaches a service or the database.

``parse`` validates a form's values with the same schemas the API uses and raises
``InvalidInput`` naming the first bad field. ``clip_text``/``clip_int`` shape values
that must be *recorded* whatever they are (a refused attempt's audit row): they never
raise and always fit the database.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

import pydantic
from ninja import Schema
from pydantic import AfterValidator, Field

from .errors import InvalidInput
from .models import Status
from .stuck import REASONS

DB_INT_MAX = 2**31 - 1  # PostgreSQL integer; PositiveIntegerField is one
MAX_COMMENT = 4000
MAX_CONSTRAINTS = 20
MAX_CONSTRAINT_LENGTH = 500


def text_refusal(value: str) -> str | None:
    """Why ``value`` can't be stored as text (None: it can)."""
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must not contain lone surrogates (not valid Unicode text)"
    return None


def _safe_text(value: str) -> str:
    reason = text_refusal(value)
    if reason:
        raise ValueError(reason)
    return value


def json_refusal(value: Any) -> str | None:
    """Why the JSON value ``value`` can't be stored (None: it can): every key and string
    is safe text and every number finite. Iterative, so depth can't exhaust the stack."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            reason = text_refusal(item)
            if reason:
                return f"{path or 'value'}: {reason}"
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{path or 'value'}: must be a finite number"
        elif isinstance(item, dict):
            for key, child in item.items():
                reason = text_refusal(str(key))
                if reason:
                    return f"{path or 'value'}: a key {reason}"
                stack.append((f"{path}.{key}" if path else str(key), child))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
    return None


def _safe_json(value: Any) -> Any:
    reason = json_refusal(value)
    if reason:
        raise ValueError(reason)
    return value


# --- the types


def Text(*, max_length: int, min_length: int = 0) -> Any:  # noqa: N802 - reads as a type
    """A string the database can hold, of bounded length."""
    return Annotated[str, Field(min_length=min_length, max_length=max_length), AfterValidator(_safe_text)]


DbInt = Annotated[int, Field(ge=1, le=DB_INT_MAX)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="64 lowercase hex characters")]
SafeJsonObject = Annotated[dict[str, Any], AfterValidator(_safe_json)]

ExecutionRef = Text(min_length=1, max_length=40)
ArtifactRef = Text(min_length=1, max_length=60)
ActionKey = Text(min_length=1, max_length=200)
Cursor = Annotated[
    str, Field(pattern=r"^(?:[Rr][Uu][Nn]_)?[0-9]{1,18}$", description="the `next` of the previous page, e.g. RUN_0042")
]
StatusName = Text(max_length=30)
WorkflowName = Text(max_length=100)
RequiredWorkflowName = Text(min_length=1, max_length=100)
IdempotencyKey = Text(min_length=1, max_length=200)
EventId = Text(min_length=1, max_length=100)
Comment = Text(max_length=MAX_COMMENT)
Instruction = Text(min_length=1, max_length=MAX_COMMENT)
Evidence = Text(min_length=1, max_length=MAX_COMMENT)
Reason = Text(max_length=2000)


# --- bodies (the API's and the screens')


class StartIn(Schema):
    workflow: RequiredWorkflowName
    input: SafeJsonObject = Field(default_factory=dict)
    idempotency_key: IdempotencyKey | None = None


class DecisionIn(Schema):
    approval_id: DbInt
    decision: Literal["approve", "reject", "request_changes"]
    artifact_version: DbInt
    content_sha256: Sha256
    comment: Comment = ""
    event_id: EventId


class DecisionEventIn(DecisionIn):
    type: Literal["approval.decision"]


SignalName = Text(min_length=1, max_length=100)


class SignalIn(Schema):
    name: SignalName
    payload: Any = Field(default=None, description="any JSON; recorded as the wait step's output")
    event_id: EventId

    @pydantic.field_validator("payload")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        return _safe_json(value)


class SignalEventIn(SignalIn):
    type: Literal["signal"]


class SignalFormIn(Schema):
    """The signal form on the execution page: the payload as JSON text, and why."""

    name: SignalName
    payload: Text(max_length=MAX_COMMENT) = ""
    reason: Text(min_length=1, max_length=2000)
    event_id: EventId


class ListFilters(Schema):
    """The execution list's query string (the screen's; the API declares its own)."""

    status: StatusName | None = None
    workflow: WorkflowName | None = None
    reason: StatusName | None = None
    cursor: Cursor | None = None


class ReasonIn(Schema):
    reason: Reason = ""


class RedraftIn(Schema):
    instruction: Instruction


ReceiptName = Text(min_length=1, max_length=100)
ReceiptValue = Text(max_length=500)


class ResolveIn(Schema):
    outcome: Literal["succeeded", "failed"]
    evidence: Evidence
    # The receipt fields the effect declares (e.g. order_id); required for succeeded when declared.
    receipt: dict[ReceiptName, ReceiptValue] | None = None


class ResolveFormIn(ResolveIn):
    key: ActionKey


# --- operators: restart from a step, close a compensation (the triage console)

StepName = Text(min_length=1, max_length=100)


class RestartIn(Schema):
    from_step: StepName
    reason: Reason = ""
    # Send again effects that already happened (a restart refuses it otherwise: executions.restart).
    accept_repeats: bool = False


class AcceptRequestIn(Schema):
    """Accept the request a drifted model call's step rebuilt (executions.drift)."""

    key: ActionKey  # the model call's key
    request_sha256: Sha256  # the rebuilt request's, as shown
    reason: Reason = ""


class CloseIn(Schema):
    outcome: Literal["succeeded", "failed"]
    evidence: Evidence


class CloseFormIn(CloseIn):
    key: ActionKey


S = TypeVar("S", bound=pydantic.BaseModel)


def parse(schema: type[S], data: Mapping[str, Any]) -> S:
    """``data`` (a form's values) as ``schema``, or InvalidInput naming the first bad field."""
    try:
        return schema.model_validate(dict(data))
    except pydantic.ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or schema.__name__
        raise InvalidInput(field, first["msg"].removeprefix("Value error, ")) from None


# --- recording what was sent, whatever it was


def clip_text(value: Any, limit: int) -> str:
    """``value`` as text the database can hold: NUL dropped, surrogates replaced, at most ``limit``."""
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip_int(value: Any) -> int | None:
    """``value`` if it fits an integer column, else None (record the raw value as clipped text)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= DB_INT_MAX:
        return value
    return None


# --- bulk operations (executions.bulk)

MAX_BULK_ITEMS = 500  # executions in one bulk run


class BulkFilterIn(Schema):
    """The execution list's filters, to pick what a dry run looks at."""

    status: Status | None = None
    reason: Literal[REASONS] | None = None  # type: ignore[valid-type]
    workflow: WorkflowName | None = None


BulkToken = Text(min_length=1, max_length=1000)
FormToken = Text(max_length=1000)


class BulkIn(Schema):
    operation: Literal["cancel", "resume", "retry"]
    ids: list[ExecutionRef] | None = Field(default=None, min_length=1, max_length=MAX_BULK_ITEMS)
    filter: BulkFilterIn | None = None
    reason: Reason = ""
    dry_run: bool = False
    token: BulkToken | None = None  # a dry run's: the run does exactly its ids or nothing


class BulkFormIn(Schema):
    """The console's confirm form: the frozen ids of its dry run, and why."""

    operation: Literal["cancel", "resume", "retry"]
    ids: list[ExecutionRef] = Field(min_length=1, max_length=MAX_BULK_ITEMS)
    reason: Reason = ""  # required: executions.bulk says so, naming the operation
    token: FormToken = ""  # required: the dry run's (executions.bulk.check_token)
