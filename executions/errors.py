"""Errors that services raise and every interface (API, screens, CLI) maps the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from .reasons import StuckReason
from .redaction import redact


class ServiceError(Exception):
    status_code = 400

    def __init__(self, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class NotFound(ServiceError):
    status_code = 404


class Gone(NotFound):
    """The execution was archived and purged (retention): the answer names the archive.
    A NotFound everywhere (a screen's 404, the CLI's exit 2), a 410 on the API."""

    status_code = 410


class Forbidden(ServiceError):
    status_code = 403


class Conflict(ServiceError):
    status_code = 409


class RateLimited(ServiceError):
    """Too many attempts of one kind by one user: try again after ``retry_after`` seconds."""

    status_code = 429

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message, retry_after=retry_after)
        self.retry_after = retry_after


class InvalidInput(ServiceError):
    """Malformed input: names the field and the reason. ``more``: the other fields refused
    at the same time, each ``(field, reason)``; ``errors`` lists them all, this one first
    (the API's 422 lists every one, a form shows each beside its field)."""

    status_code = 422

    def __init__(self, field: str, reason: str, *, more: Sequence[tuple[str, str]] = ()) -> None:
        errors = ((field, reason), *more)
        super().__init__("; ".join(f"{f}: {r}" for f, r in errors), field=field, reason=reason)
        self.field = field
        self.reason = reason
        self.errors: tuple[tuple[str, str], ...] = errors

    @classmethod
    def of(cls, errors: Sequence[tuple[str, str]]) -> InvalidInput:
        """One InvalidInput for every ``(field, reason)`` of ``errors`` (at least one)."""
        (field, reason), *more = errors
        return cls(field, reason, more=more)


class FailureKind(StrEnum):
    """Why a step or an external call failed; decides what the runtime does next."""

    TRANSIENT = "transient"  # retry with backoff
    RATE_LIMITED = "rate_limited"  # retry after the provider's Retry-After
    INVALID_INPUT = "invalid_input"  # stop: retrying the same input can't help
    PERMISSION = "permission"  # stop: a person must grant or change something
    OUTCOME_UNKNOWN = "outcome_unknown"  # sent, no answer: reconcile before anything else
    BUSINESS_REJECTION = "business_rejection"  # the other side said no: change state


class StepFailure(Exception):
    """Raised by step code and effect calls to say how they failed.

    The message and evidence are redacted when the failure is made (executions.redaction):
    they often quote what an outside service said, and every record of the failure (the
    status reason, events, the step run, the action) is written from them."""

    def __init__(self, kind: FailureKind, message: str, *, retry_after: float | None = None, evidence: Any = None):
        message, evidence = redact(message), redact(evidence)
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after = retry_after
        self.evidence = evidence


class InputNeeded(Exception):
    """Raised by a tool's call when its provider asks a person for input before it acts
    (an MCP server's elicitation): nothing was done. The agent step parks the execution
    ``waiting`` at the question (``input_id``: the same each time the call asks it, so the
    answer is found when the call runs again), and the call is made again once answered."""

    traced_as_error = False  # a question for a person, not a failure (executions.engine.tracing)

    gate = "input"  # the gate it parks at (executions.questions)

    def __init__(self, *, input_id: str, tool: str, message: str, schema: Any) -> None:
        super().__init__(f"{tool} asks: {message}")
        self.input_id, self.tool, self.message, self.schema = input_id, tool, message, schema


class NeedsAttention(Exception):
    """Raised by step code when a person must look; ``code`` is a stuck reason
    (``model_drift``, ``budget_exceeded``…). The runner records the failed attempt and
    sends the execution to needs_attention with the message, without a retry."""

    code: str = StuckReason.STEP_ERROR

    def __init__(self, message: str, *, code: str | None = None, evidence: Any = None) -> None:
        message, evidence = redact(message), redact(evidence)  # as StepFailure's
        super().__init__(message)
        self.message = message
        self.evidence = evidence
        if code:
            self.code = code


def readable(error: Mapping[str, Any], model: Any = None) -> str:
    """A pydantic error's reason as a sentence for a person. A pattern mismatch names the
    form expected (the field's description, when ``model`` declares one), never the regex."""
    if error.get("type") == "string_pattern_mismatch":
        loc = error.get("loc") or ()
        fields = getattr(model, "model_fields", {})
        described = fields[loc[-1]].description if loc and loc[-1] in fields else None
        return f"is not in the expected form ({described})" if described else "is not in the expected form"
    return str(error.get("msg", "")).removeprefix("Value error, ")
