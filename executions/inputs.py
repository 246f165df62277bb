"""What the API and the screens accept: one set of input types, checked at the edge.

Every body, query string, path parameter and form value goes through these types, so
a value the database can't hold (``executions.storable``: NUL, a lone surrogate, an
integer past 2**31-1) is a 422 naming the field (a message on a screen) before
anything reaches a service or the database.

``parse`` validates a form's values with the same schemas the API uses and raises
``InvalidInput`` naming the first bad field. The edge's room: it imports ninja, so
nothing below the API (services, the engine, the authoring surface) imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

import pydantic
from ninja import Schema
from pydantic import Field

from .engine.events import EventId
from .errors import InvalidInput, readable
from .storable import DB_INT_MAX, STORABLE, STORABLE_JSON
from .waits import SignalName

MAX_COMMENT = 4000
MAX_RECEIPT_VALUE = 500


# --- the types


DbInt = Annotated[int, Field(ge=1, le=DB_INT_MAX)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="64 lowercase hex characters")]
SafeJsonObject = Annotated[dict[str, Any], STORABLE_JSON]

ExecutionRef = Annotated[str, Field(min_length=1, max_length=40), STORABLE]
ArtifactRef = Annotated[str, Field(min_length=1, max_length=60), STORABLE]
ActionKey = Annotated[str, Field(min_length=1, max_length=200), STORABLE]
Cursor = Annotated[
    str, Field(pattern=r"^(?:[Rr][Uu][Nn]_)?[0-9]{1,18}$", description="the `next` of the previous page, e.g. RUN_0042")
]
StatusName = Annotated[str, Field(max_length=30), STORABLE]
WorkflowName = Annotated[str, Field(max_length=100), STORABLE]
# The execution list's search by a field of the input: KEY:VALUE (selectors.input_match).
InputFilter = Annotated[str, Field(max_length=600), STORABLE]
RequiredWorkflowName = Annotated[str, Field(min_length=1, max_length=100), STORABLE]
IdempotencyKey = Annotated[str, Field(min_length=1, max_length=200), STORABLE]
Comment = Annotated[str, Field(max_length=MAX_COMMENT), STORABLE]
Instruction = Annotated[str, Field(min_length=1, max_length=MAX_COMMENT), STORABLE]
Evidence = Annotated[str, Field(min_length=1, max_length=MAX_COMMENT), STORABLE]
Reason = Annotated[str, Field(max_length=2000), STORABLE]
# A USD amount (a budget, a raise): a JSON number, more than 0, at most 1e6 (strings refused).
UsdAmount = Annotated[
    float, Field(gt=0, le=1_000_000, allow_inf_nan=False, strict=True, description="US dollars, > 0, at most 1e6")
]


# --- bodies (the API's and the screens')


# A registered version of a workflow, to start instead of the latest.
WorkflowVersion = Annotated[int, Field(ge=1, le=DB_INT_MAX, strict=True, description="a registered version")]


class Body(Schema):
    """Base of every API body: a field it doesn't declare is a 422 naming it (a typo in an
    optional field would otherwise be dropped in silence). Screen forms accept the
    browser's extra fields (the CSRF token): they set ``extra="ignore"``."""

    model_config = pydantic.ConfigDict(extra="forbid")


FORM = pydantic.ConfigDict(extra="ignore")


class StartIn(Body):
    # Its fields are services.execution_start's keywords: the API and the start form pass model_dump().
    workflow: RequiredWorkflowName
    input: SafeJsonObject = Field(default_factory=dict)
    idempotency_key: IdempotencyKey | None = None
    budget_usd: UsdAmount | None = None
    version: WorkflowVersion | None = None


class BudgetIn(Body):
    add_usd: UsdAmount
    reason: Reason = ""


class SignalFormIn(Schema):
    """The signal form on the execution page: the payload as JSON text, and why."""

    name: SignalName
    payload: Annotated[str, Field(max_length=MAX_COMMENT), STORABLE] = ""
    reason: Annotated[str, Field(min_length=1, max_length=2000), STORABLE]
    event_id: EventId


class ListFilters(Schema):
    """The execution list's query string (the screen's; the API declares its own)."""

    status: StatusName | None = None
    workflow: WorkflowName | None = None
    reason: StatusName | None = None
    cursor: Cursor | None = None
    input: InputFilter | None = None


class ReasonIn(Body):
    reason: Reason = ""


class RedraftIn(Body):
    instruction: Instruction


ReceiptName = Annotated[str, Field(min_length=1, max_length=100), STORABLE]
ReceiptValue = Annotated[str, Field(max_length=MAX_RECEIPT_VALUE), STORABLE]


class ResolveIn(Body):
    outcome: Literal["succeeded", "failed"]
    evidence: Evidence
    # The receipt fields the effect declares (e.g. order_id); required for succeeded when declared.
    receipt: dict[ReceiptName, ReceiptValue] | None = None


class ResolveFormIn(ResolveIn):
    model_config = FORM
    key: ActionKey


S = TypeVar("S", bound=pydantic.BaseModel)


def parse(schema: type[S], data: Mapping[str, Any]) -> S:
    """``data`` (a form's values) as ``schema``, or InvalidInput naming the first bad field."""
    try:
        return schema.model_validate(dict(data))
    except pydantic.ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or schema.__name__
        raise InvalidInput(field, readable(first, schema)) from None
