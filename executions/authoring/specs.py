"""What a workflow says about a gate step: its spec; and ``Choice``, what a step that
chooses its next step says about the choice. A leaf, so the authoring surface,
the engine and every gate (``approvals.gate``, ``executions.waits``) share it without
importing each other.

``GateSpec.kind`` names the registered gate that runs the step
(``executions.engine.gates``); a gate kind subclasses it with what it needs
(``approvals.gate.Approval``: the artifact and the action). ``WaitFor`` is the wait
gate's: ``flow.wait(…)`` builds it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import pydantic

from ..errors import InvalidInput, readable

JSON = dict[str, Any]
# ``then=END``: the workflow completes after this step (instead of going on to the next declared).
END = ""


class GateSpec:
    """What a workflow says about one gate step; ``kind`` names the gate that runs it."""

    kind: ClassVar[str]


class SignalPayload(pydantic.BaseModel):
    """Base of the schema a wait declares for its signal's payload (``flow.wait(…,
    payload=Model)``): typed, nothing coerced, an unknown field refused (a 422 naming
    ``payload.<field>``)."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


@dataclass(frozen=True, kw_only=True)
class WaitFor(GateSpec):
    """A wait gate's spec: the signal ``signal`` (or, with ``signal=""``, only a timer),
    for at most ``timeout`` seconds: a number, or a function of the execution's input.
    Past the timeout, a signal wait needs attention (``waiting_overdue``), or continues
    at ``on_timeout`` when it names a step; a timer simply goes on. ``payload``: the schema the signal's payload must meet (a pydantic
    model, strict, unknown fields refused); without one the signal carries none."""

    kind: ClassVar[str] = "wait"
    signal: str
    timeout: float | Callable[[Any], float]
    payload: type[pydantic.BaseModel] | None = None
    # The step to continue at when the timeout passes without the signal (its output says
    # ``timed_out``); None: a signal wait past its timeout needs a person.
    on_timeout: str | None = None
    # ``timeout`` is a function of the step context (``flow.sleep``), not of the input.
    timeout_of_context: bool = False
    # Other signals it also ends on, each with the schema of its payload (None: none):
    # ``flow.wait(…, signals={"customer_message": Message, "close": None})``.
    also: tuple[tuple[str, Any], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """Every signal it ends on, the first being ``signal`` ("" alone: a timer)."""
        return (self.signal, *(name for name, _ in self.also)) if self.signal else ()

    @property
    def goes_on_by_itself(self) -> bool:
        """Past its timeout it continues without anyone: a timer, or ``on_timeout``."""
        return not self.signal or bool(self.on_timeout)

    def parse_payload(self, raw: Any, name: str = "") -> JSON:
        """The payload of signal ``name`` (default: ``signal``) as its schema reads it;
        InvalidInput naming ``payload.<field>``."""
        schema = dict(self.also).get(name) if name and name != self.signal else self.payload
        if schema is None:
            if raw in (None, {}):
                return {}
            raise InvalidInput("payload", f"the signal {name or self.signal} takes no payload")
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise InvalidInput("payload", "must be a JSON object")
        try:
            return schema.model_validate(raw).model_dump(mode="json", exclude_none=True)
        except pydantic.ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            field = ".".join(["payload", *(str(p) for p in error["loc"])])
            if error["type"] == "extra_forbidden":
                reason = f"unknown field (allowed: {', '.join(schema.model_fields)})"
            else:
                reason = readable(error, schema)
            raise InvalidInput(field, reason) from None

    def timeout_seconds(self, input: JSON, ctx: Any = None) -> float:
        """The timeout in seconds: the number, or the function of the input (of the step
        context, for a sleep). Raises ValueError unless positive."""
        if callable(self.timeout):
            seconds = self.timeout(ctx if self.timeout_of_context else input)
        else:
            seconds = self.timeout
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
            raise ValueError(f"a wait's timeout must be a positive number of seconds (got {seconds!r})")
        return float(seconds)


@dataclass(frozen=True, kw_only=True)
class Choice:
    """The successors a step chooses among (``to``), and the field of its recorded output
    that names the one chosen (``key``); ``may_end``: it may choose ``END``."""

    to: tuple[str, ...]
    key: str
    may_end: bool = False

    def chosen(self, output: JSON | None) -> str | None:
        """The step ``output`` chose, or None when it names none of ``to``."""
        chosen = (output or {}).get(self.key)
        return chosen if chosen in self.to or (self.may_end and chosen == END) else None
