"""The small API a workflow is written in.

A workflow reads as the business process: named steps with labels, a model step,
gates (an approval bound to an artifact, a wait for a signal), effects with business
keys::

    flow = Workflow(name="monthly_report", version=1, title="Monthly report", input=MonthlyReportInput)

    @flow.step("retrieve_figures", label="Retrieving figures")
    def retrieve(ctx): return {...}

    flow.gate("review", label="Awaiting approval", spec=Approval(artifact="report", action="publish_report"))

    @flow.effect("publish", label="Publishing", action="publish_report", guarded_by="review")
    def publish(ctx): return Effect(key=f"{ctx.ref}:publish:v{...}", args={...}, call=..., lookup=...)

    flow.wait("confirmation", label="Waiting for the shipment", signal="shipment_confirmed",
              timeout=lambda input: input["confirm_within_seconds"])

Leases, checkpoints, the ledger, retries and recording happen underneath (runner);
gates are run by the gate of their spec's kind (executions.engine.gates).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pydantic
from django.conf import settings

from ..errors import InvalidInput, readable
from ..storable import text_refusal
from . import declarations
from .children import StartChildren
from .outbound import Template
from .retry import DEFAULT as DEFAULT_RETRY
from .retry import RetryPolicy
from .routes import RouteSpec
from .specs import END, Choice, GateSpec, WaitFor
from .tools import AgentSpec, Budget, Tool

JSON = dict[str, Any]
# The optional ``constraints`` every workflow takes: how many, and how long each.
MAX_CONSTRAINTS = 20
MAX_CONSTRAINT_LENGTH = 500


class StepKind(StrEnum):
    COMPUTE = "compute"  # safe to rerun until checkpointed
    MODEL = "model"  # the response is recorded and never asked again once checkpointed
    EFFECT = "effect"  # an external side effect, only through the ledger
    AGENT = "agent"  # a model proposes tool calls; the runtime decides (executions.agent.steps)
    ROUTE = "route"  # the model chooses the next step among declared successors (executions.agent.routes)
    BRANCH = "branch"  # code chooses the next step among declared successors; rerun until checkpointed
    # Gates (executions.engine.gates): the execution stops until something outside happens.
    APPROVAL = "approval"  # a person decides on one artifact version (approvals.gate)
    WAIT = "wait"  # a named signal, or a timer (executions.waits)
    CHILDREN = "children"  # child executions, until every one is terminal (executions.children)


def parse_constraints(raw: JSON) -> list[str]:
    """The optional ``constraints`` input every workflow accepts: extra mandatory
    instructions for the agent, at most ``MAX_CONSTRAINTS`` of at most
    ``MAX_CONSTRAINT_LENGTH`` characters. Raises InvalidInput naming ``input.constraints``."""
    constraints = raw.get("constraints", [])
    if not isinstance(constraints, list) or not all(isinstance(c, str) and c.strip() for c in constraints):
        raise InvalidInput("input.constraints", "must be a list of non-empty strings")
    if len(constraints) > MAX_CONSTRAINTS:
        raise InvalidInput("input.constraints", f"at most {MAX_CONSTRAINTS} constraints (got {len(constraints)})")
    for index, constraint in enumerate(constraints):
        if len(constraint) > MAX_CONSTRAINT_LENGTH:
            raise InvalidInput(f"input.constraints.{index}", f"at most {MAX_CONSTRAINT_LENGTH} characters")
        reason = text_refusal(constraint)
        if reason:
            raise InvalidInput(f"input.constraints.{index}", reason)
    return [c.strip() for c in constraints]


class WorkflowInput(pydantic.BaseModel):
    """Base of every workflow's input, declared as a pydantic model: fields are typed,
    nothing is coerced, an unknown field is refused, and every workflow takes the
    optional ``constraints``. ``parse_with(Model)`` makes the workflow's ``parse_input``;
    a refusal is InvalidInput naming ``input.<field>`` (the API's 422). A field's first
    ``examples`` entry is quoted when it is missing. A validator may raise InvalidInput
    itself to say exactly why (a month outside the snapshot)."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)

    constraints: list[str] = pydantic.Field(
        default_factory=list,
        description="extra mandatory instructions for the agent",
        json_schema_extra={
            "maxItems": MAX_CONSTRAINTS,
            "items": {"type": "string", "maxLength": MAX_CONSTRAINT_LENGTH},
        },
    )

    @pydantic.field_validator("constraints", mode="before")
    @classmethod
    def _constraints(cls, value: Any) -> list[str]:
        return parse_constraints({"constraints": value})


def parse_with(model: type[WorkflowInput]) -> Callable[[JSON], JSON]:
    """``parse_input`` for a workflow whose input is ``model``: the validated input as JSON,
    or one InvalidInput naming every refused field (issue 39, item 15)."""

    def parse(raw: JSON) -> JSON:
        refused: list[tuple[str, str]] = []
        aside: set[str] = set()
        rest = dict(raw) if isinstance(raw, dict) else raw
        while True:
            try:
                parsed = model.model_validate(rest).model_dump(mode="json")
            except pydantic.ValidationError as exc:
                for error in exc.errors(include_url=False):
                    refusal = _refusal(model, error)
                    if _top(refusal.field) not in aside:
                        refused.append((refusal.field, refusal.reason))
            except InvalidInput as exc:
                # A validator's own refusal stops pydantic at that field: set the field
                # aside and check the others again, so every refusal is said at once.
                refused += exc.errors
                name = _top(exc.field)
                if isinstance(rest, dict) and name in rest and name not in aside:
                    aside.add(name)
                    del rest[name]
                    continue
            if refused:
                raise InvalidInput.of(refused) from None
            return parsed

    return parse


def _top(field: str) -> str:
    """The input's top-level field an InvalidInput names: ``input.constraints.3`` → ``constraints``."""
    parts = field.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "input" else ""


def _refusal(model: type[WorkflowInput], error: Mapping[str, Any]) -> InvalidInput:
    loc = [str(part) for part in error["loc"]]
    field = ".".join(["input", *loc])
    if error["type"] == "extra_forbidden":
        return InvalidInput(field, f"unknown field (allowed: {', '.join(model.model_fields)})")
    if error["type"] == "missing" and loc and loc[0] in model.model_fields:
        examples = model.model_fields[loc[0]].examples
        return InvalidInput(field, f"required, e.g. {examples[0]!r}".replace("'", '"') if examples else "required")
    return InvalidInput(field, readable(error, model))


@dataclass(frozen=True, kw_only=True)
class Effect:
    """One external side effect, described before it happens.

    ``key`` is the business identity (``RUN_0001:publish:v2``), stable across retries.
    ``call(args, key)`` performs it and returns the provider's receipt, raising
    ``StepFailure`` to say how it failed. ``lookup(key, args)`` asks the provider whether
    it already happened (receipt or None). ``honors_key``: the provider deduplicates
    on the key, so re-sending with the same key is safe.
    """

    key: str
    args: JSON
    call: Callable[[JSON, str], JSON]
    lookup: Callable[[str, JSON], JSON | None] | None = None
    honors_key: bool = True


@dataclass(frozen=True, kw_only=True)
class ReceiptField:
    """A receipt field the steps after an effect read (``order_id`` of a submitted order).

    When an operator resolves an unknown outcome as succeeded, the runtime can't ask
    the provider, so the operator gives these fields; each must match ``pattern``
    (whole value). ``label`` and ``example`` are what the form shows.
    """

    name: str
    label: str
    pattern: str = r".+"
    example: str = ""
    max_length: int = 200

    def problem(self, value: object) -> str:
        """Why ``value`` is not acceptable for this field, or "" when it is."""
        if not isinstance(value, str) or not value.strip():
            example = f", e.g. {self.example}" if self.example else ""
            return f"required when the outcome is succeeded: {self.label}{example}"
        if len(value) > self.max_length:
            return f"at most {self.max_length} characters"
        if "\x00" in value or not re.fullmatch(self.pattern, value.strip()):
            example = f" (e.g. {self.example})" if self.example else ""
            return f"{self.label} must match {self.pattern}{example}"
        return ""


@dataclass(frozen=True, kw_only=True)
class Step:
    name: str
    label: str
    kind: str  # a StepKind
    fn: Callable[..., Any] | None = None
    prompt_version: str = ""
    action: str = ""  # effect: the ledger action type
    guarded_by: str = ""  # effect: the gate step that must let it through (checked right before the call)
    retry: RetryPolicy = DEFAULT_RETRY
    # The kind's own declaration, in one slot: a gate's GateSpec (run by the gate of kind
    # ``spec.kind``), an agent's AgentSpec, a route's RouteSpec, or whatever a kind that
    # plugs in declares (executions.engine.kinds). A spec that chooses the next step has
    # a ``choice`` (a ``Choice``).
    spec: Any = None
    timeout_seconds: float | None = None  # how long one attempt may run; None: the workflow's
    receipt_fields: tuple[ReceiptField, ...] = ()  # effect: what the next steps read from its receipt
    third_party: bool = False  # effect: sends text to someone outside (executions.authoring.outbound)
    templates: tuple[Template, ...] = ()  # effect: the fixed messages it sends, when no gate guards it
    # Earlier steps whose output names this execution (a key, a client reference) and that
    # this step checks: a restart that runs this step must run them again too.
    restart_with: tuple[str, ...] = ()
    to: tuple[str, ...] = ()  # branch: the successors its code chooses among (or END)
    # The edge out of this step: None, the next declared step; END, the workflow completes;
    # a step's name, that step. A route's edges are its ``route.to``.
    then: str | None = None
    # effect: the step it goes on at when refused for good (its output ``{"failed": …}``)
    on_failure: str | None = None

    @property
    def is_gate(self) -> bool:
        return isinstance(self.spec, GateSpec)

    @property
    def agent(self) -> AgentSpec | None:
        return self.spec if isinstance(self.spec, AgentSpec) else None

    @property
    def route(self) -> RouteSpec | None:
        return self.spec if isinstance(self.spec, RouteSpec) else None

    @property
    def choice(self) -> Choice | None:
        """What it chooses its next step among, by its recorded output: a branch's ``to``
        (its code's ``{"next"}``), or its declaration's (a route's ``{"route"}``)."""
        if self.kind == StepKind.BRANCH:
            return Choice(to=self.to, key="next", may_end=True)
        return getattr(self.spec, "choice", None)

    @property
    def chooses(self) -> bool:
        """Its next step depends on its recorded output: a route, a branch, a wait with
        ``on_timeout``, an approval with ``on_reject``. (An effect with ``on_failure`` is
        expected to succeed: what lies ahead of it is its usual edge.)"""
        return self.choice is not None or bool(set(self.alternatives) - {"failed"})

    @property
    def alternatives(self) -> dict[str, str]:
        """A step's declared other way on, by what its output says: ``{"timed_out":
        step}`` (a wait's ``on_timeout``), ``{"reject": step}`` (an approval's ``on_reject``),
        ``{"failed": step}`` (an effect's ``on_failure``)."""
        found = {}
        if on_timeout := getattr(self.spec, "on_timeout", None):
            found["timed_out"] = on_timeout
        if on_reject := getattr(self.spec, "on_reject", None):
            found["reject"] = on_reject
        if self.on_failure:
            found["failed"] = self.on_failure
        return found

    def alternative(self, output: JSON) -> str | None:
        """The step its recorded ``output`` leads to instead of the usual edge, or None."""
        alternatives = self.alternatives
        if "timed_out" in alternatives and output.get("timed_out") is True:
            return alternatives["timed_out"]
        if "reject" in alternatives and output.get("decision") == "reject":
            return alternatives["reject"]
        if "failed" in alternatives and failed_for_good(output):
            return alternatives["failed"]
        return None


FAILED_FOR_GOOD = frozenset({"kind", "error", "attempt"})


def failed_for_good(output: Any) -> bool:
    """``output`` is what an effect with ``on_failure`` records when it failed for good
    (the runtime's exact shape, ``{"failed": {"kind", "error", "attempt"}}``), not a
    provider's receipt that happens to name a failure."""
    if not isinstance(output, dict) or set(output) != {"failed"}:
        return False
    inner = output["failed"]
    return isinstance(inner, dict) and set(inner) == FAILED_FOR_GOOD


def _anything(raw: JSON) -> JSON:
    return raw


def _positive(workflow: Workflow, step: str, name: str, value: Any) -> None:
    """A declared number of seconds: a positive number, else refused at import naming it."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{workflow.name} v{workflow.version}: {step}'s {name} must be a positive number of seconds")


@dataclass(kw_only=True)
class Workflow:
    """A workflow: ``Workflow(name=, version=, title=, input=Model, description="")``.

    ``input`` (a ``WorkflowInput`` subclass) is the published input: the API validates
    against it (422 naming ``input.<field>``), the catalogue publishes its JSON Schema
    and the dashboard draws the start form from it. ``parse_input`` (raising
    InvalidInput) stays for what a schema can't say: it runs on the validated input
    (or on the raw input when there is no ``input``). ``goal`` is the first line of
    the progress notes (default: the title)."""

    name: str
    version: int
    title: str
    input: type[WorkflowInput] | None = None
    description: str = ""
    parse_input: Callable[[JSON], JSON] | None = None  # raises executions.errors.InvalidInput
    goal: Callable[[JSON], str] | None = None
    constraints: Callable[[JSON], list[str]] = lambda _input: []
    deadline_seconds: float | None = None  # from start; past it the execution stops
    step_timeout_seconds: float | None = None  # each step's timeout unless it names its own
    retention_days: int | None = None  # kept this long after it ends (None: RUNTIME_RETENTION_DAYS; issue 23)
    steps: list[Step] = field(default_factory=list)
    # action type → fn(args, receipt) describing how to undo a done effect (recorded on cancel)
    compensations: dict[str, Callable[[JSON, JSON], JSON]] = field(default_factory=dict)
    # A schedule's firing time (aware, in the schedule's time zone) → the input it starts
    # the workflow with (the schedule's own input is laid over it): schedules/ (issue 22).
    scheduled_input: Callable[[Any], JSON] | None = None
    # What a completed execution produced: ``fn(ctx)`` at its last step's checkpoint (None: that
    # step's output). The API's ``result``, ``keel show``, the page, the webhook, a parent's view.
    result: Callable[[Any], Any] | None = None
    # How many visits one step may have (each pass through a loop is one): past it the
    # execution needs attention (``loop_limit``), nothing called.
    max_visits: int = 25
    # How an execution of an older version becomes one of this version when an operator
    # migrates it (triage.migration): ``{old_version: fn(state) -> state}``, where ``state`` is
    # ``{"step": the step it stands at, "outputs": {step: output}}`` as the old version left
    # it and the answer is the same shape for this version (a step renamed, an output
    # reshaped). Without an entry, a step keeps its name and its output as it is.
    migrate_from: dict[int, Callable[[JSON], JSON]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.max_visits, bool) or not isinstance(self.max_visits, int) or self.max_visits < 1:
            raise ValueError(f"{self.name} v{self.version}: max_visits must be an integer of at least 1")
        for old, fn in self.migrate_from.items():
            if isinstance(old, bool) or not isinstance(old, int) or not 1 <= old < self.version or not callable(fn):
                raise ValueError(
                    f"{self.name} v{self.version}: migrate_from maps an older version (an integer below "
                    f"{self.version}) to a function of the state, not {old!r}: {fn!r}"
                )
        if self.input is not None and not (isinstance(self.input, type) and issubclass(self.input, WorkflowInput)):
            raise TypeError(f"{self.name} v{self.version}: input must be a WorkflowInput subclass, not {self.input!r}")
        extra = self.parse_input or _anything
        if self.input is not None:
            schema_parse = parse_with(self.input)
            self.parse_input = lambda raw: extra(schema_parse(raw))
        else:
            self.parse_input = extra
        if self.goal is None:
            title = self.title
            self.goal = lambda _data: title

    def input_schema(self) -> JSON:
        """The JSON Schema of this version's input (an open object when it declares none)."""
        if self.input is None:
            return {"type": "object", "title": f"{self.title} input"}
        return self.input.model_json_schema()

    # --- declaring steps

    def step(
        self,
        name: str,
        *,
        label: str,
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout: float | None = None,
        then: str | None = None,
    ) -> Callable:
        return self._decorator(
            name=name, label=label, kind=StepKind.COMPUTE, retry=retry, timeout_seconds=timeout, then=then
        )

    def model_step(
        self,
        name: str,
        *,
        label: str,
        prompt_version: str,
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout: float | None = None,
        then: str | None = None,
    ) -> Callable:
        return self._decorator(
            name=name,
            label=label,
            kind=StepKind.MODEL,
            prompt_version=prompt_version,
            retry=retry,
            timeout_seconds=timeout,
            then=then,
        )

    def agent(
        self,
        name: str,
        *,
        label: str,
        prompt_id: str,
        prompt_version: str,
        instruction: Callable[[Any], str],
        tools: list[Tool],
        budget: Budget | None = None,
        done_when: Callable | None = None,
        offline_policy: Callable | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout: float | None = None,
        then: str | None = None,
    ) -> None:
        """An agent step: the model proposes calls of ``tools``; the runtime checks each is
        allowed now, validates and normalises its arguments, runs reads at once, sends
        effects through the ledger and asks for approval where a tool needs it
        (executions.agent.steps). Its prompt is built from the execution's notes and
        ``instruction(ctx)``, never from a chat history."""
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name} v{self.version}: agent {name} declares a tool twice")
        for tool in tools:  # a tool's refused call is told to the model; only a gate step continues elsewhere
            if getattr(tool.approval, "on_reject", None):
                raise ValueError(
                    f"{self.name} v{self.version}: agent {name}'s tool {tool.name} can't take on_reject: a rejected "
                    "call is told to the model as refused; on_reject belongs to an approval gate step"
                )
        spec = AgentSpec(
            prompt_id=prompt_id,
            instruction=instruction,
            tools=tuple(tools),
            budget=budget or Budget(),
            done_when=done_when,
            offline_policy=offline_policy,
        )
        self.declare(
            StepKind.AGENT,
            name,
            label=label,
            spec=spec,
            prompt_version=prompt_version,
            retry=retry,
            timeout=timeout,
            then=then,
        )

    def route(
        self,
        name: str,
        *,
        label: str,
        prompt_id: str,
        prompt_version: str,
        instruction: Callable[[Any], str],
        to: list[str],
        offline_policy: Callable | None = None,
        max_refusals: int = 2,
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout: float | None = None,
    ) -> None:
        """A route step: the model chooses the next step among ``to`` (steps of this
        workflow, declared before or after it); the runtime refuses any other choice
        (executions.authoring.routes). Its prompt is built from the notes and
        ``instruction(ctx)``, like an agent's."""
        if len(to) < 2 or len(set(to)) != len(to):
            raise ValueError(f"{self.name} v{self.version}: route {name} needs at least two distinct steps in to=")
        spec = RouteSpec(
            prompt_id=prompt_id,
            instruction=instruction,
            to=tuple(to),
            offline_policy=offline_policy,
            max_refusals=max_refusals,
        )
        self.declare(
            StepKind.ROUTE, name, label=label, spec=spec, prompt_version=prompt_version, retry=retry, timeout=timeout
        )

    def branch(self, name: str, *, label: str, to: list[str], retry: RetryPolicy = DEFAULT_RETRY) -> Callable:
        """A branch: the decorated ``fn(ctx)`` returns the next step, one of ``to`` (steps
        declared before or after it) or ``END``. The choice is its output (``{"next":
        name}``), recorded and replayed; any other answer needs attention, naming it."""
        if len(to) < 2 or len(set(to)) != len(to):
            raise ValueError(f"{self.name} v{self.version}: branch {name} needs at least two distinct steps in to=")
        return self._decorator(name=name, label=label, kind=StepKind.BRANCH, retry=retry, to=tuple(to))

    def sleep(self, name: str, *, label: str, seconds: float | Callable[[Any], float], then: str | None = None) -> None:
        """A durable sleep: the execution waits ``seconds`` (a number, or ``fn(ctx)``)
        without a worker, with its ``due_at`` shown, then goes on by itself (to ``then``)."""
        if not callable(seconds):
            _positive(self, name, "seconds", seconds)
        spec = WaitFor(signal="", timeout=seconds, timeout_of_context=callable(seconds))
        self.gate(name, label=label, spec=spec, then=then)

    def effect(
        self,
        name: str,
        *,
        label: str,
        action: str,
        guarded_by: str = "",
        retry: RetryPolicy = DEFAULT_RETRY,
        receipt: tuple[ReceiptField, ...] = (),
        third_party: bool = False,
        templates: tuple[Template, ...] = (),
        restart_with: tuple[str, ...] = (),
        then: str | None = None,
        on_failure: str | None = None,
    ) -> Callable:
        """An external side effect. ``guarded_by`` names the gate step that must let it
        through (its gate's ``check_effect`` runs right before the call). ``receipt``
        names the receipt fields later steps read, so an operator resolving an unknown
        outcome must supply them. ``third_party``: it sends text to someone outside; no
        gate guarding it, it must declare the ``templates`` it fills (executions.authoring.outbound).
        ``restart_with`` names earlier steps whose output belongs to this execution alone
        (a reference carrying its id, which the effect checks): a restart (triage.restart)
        that runs this step must run those too. ``on_failure`` names the step it goes on
        at when the provider refused it for good or its retries ran out (the ledger's
        action ``failed``; never an unknown outcome, never a permission refusal, which
        stop for a person), its output then ``{"failed": {"kind", "error", "attempt"}}``;
        without it such a failure ends the execution ``failed``."""
        if on_failure is not None and not on_failure:
            raise ValueError(f"{self.name} v{self.version}: {name}'s on_failure must name a step (not END)")
        return self._decorator(
            name=name,
            label=label,
            kind=StepKind.EFFECT,
            action=action,
            guarded_by=guarded_by,
            retry=retry,
            receipt_fields=tuple(receipt),
            third_party=third_party,
            templates=tuple(templates),
            restart_with=tuple(restart_with),
            then=then,
            on_failure=on_failure,
        )

    def gate(self, name: str, *, label: str, spec: GateSpec, then: str | None = None) -> None:
        """A gate step, run by the registered gate of kind ``spec.kind``."""
        self.declare(spec.kind, name, label=label, spec=spec, then=then)

    def declare(
        self,
        kind: str,
        name: str,
        *,
        label: str,
        spec: Any = None,
        fn: Callable | None = None,
        prompt_version: str = "",
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout: float | None = None,
        then: str | None = None,
    ) -> None:
        """A step of any kind with its own declaration in ``spec``: how a step kind that
        plugs in (executions.engine.kinds) is declared without a method here. Its module
        may register a shorter way, ``flow.<name>(…)`` (executions.authoring.declarations)."""
        self._add(
            Step(
                name=name,
                label=label,
                kind=kind,
                spec=spec,
                fn=fn,
                prompt_version=prompt_version,
                retry=retry,
                timeout_seconds=timeout,
                then=then,
            )
        )

    def __getattr__(self, attr: str) -> Callable:
        """``flow.<name>(…)`` for a declaration a step kind registered."""
        declared = declarations.get(attr) if not attr.startswith("_") else None
        if declared is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")
        return functools.partial(declared, self)

    def wait(
        self,
        name: str,
        *,
        label: str,
        signal: str = "",
        timeout: float | Callable[[JSON], float],
        payload: type[pydantic.BaseModel] | None = None,
        on_timeout: str | None = None,
        signals: dict[str, type[pydantic.BaseModel] | None] | None = None,
        then: str | None = None,
    ) -> None:
        """Wait for the signal ``signal`` (``POST …/events`` with ``type: "signal"``) for
        at most ``timeout`` seconds (a function of the input, or a number). ``payload``:
        the schema its payload must meet (none: it carries none). ``on_timeout``: the
        step the execution continues at when no signal came in time (a business outcome;
        its output says ``timed_out``); without it, a timeout needs a person
        (``waiting_overdue``). ``signals``: instead of ``signal`` and ``payload``, several
        signals it ends on, each name with its payload's schema (None: none); the output's
        ``signal`` says which came. ``then``: the step a signal in time leads to (default:
        the next declared)."""
        if not callable(timeout):
            _positive(self, name, "timeout", timeout)
        if signals:
            if signal or payload is not None:
                raise ValueError(f"{self.name} v{self.version}: {name} takes signal= and payload=, or signals=")
            (signal, payload), *others = signals.items()
        else:
            others = []
        names = (signal, *dict(others))
        if signal and (any(not n or "|" in n for n in names) or len("|".join(names)) > 100):
            raise ValueError(f"{self.name} v{self.version}: {name} needs signal names (no '|', 100 characters in all)")
        # signal="" is a timer (what flow.sleep declares; kept for workflows written before it).
        spec = WaitFor(
            signal=signal, timeout=timeout, payload=payload, on_timeout=on_timeout or None, also=tuple(others)
        )
        self.gate(name, label=label, spec=spec, then=then)

    def children(self, name: str, *, label: str, then: str | None = None) -> Callable:
        """A step that starts child executions and waits, without a worker, until every
        one is terminal: the decorated ``fn(ctx)`` returns the ``Child``s to start
        (executions.authoring.children). Its output: each child's, by key."""

        def register(fn: Callable[[Any], list]) -> Callable:
            self.gate(name, label=label, spec=StartChildren(start=fn), then=then)
            return fn

        return register

    def compensation(self, action: str) -> Callable:
        """Declare how a done ``action`` would be undone if the execution is cancelled after it.

        The runtime records the compensation as a planned action; it never runs it
        on its own, because undoing is a business decision.
        """

        def register(fn: Callable[[JSON, JSON], JSON]) -> Callable:
            self.compensations[action] = fn
            return fn

        return register

    def _decorator(self, **spec: Any) -> Callable:
        def register(fn: Callable) -> Callable:
            self._add(Step(fn=fn, **spec))
            return fn

        return register

    def _add(self, step: Step) -> None:
        gate = next((s for s in self.steps if s.name == step.guarded_by and s.is_gate), None)
        if step.guarded_by and gate is None:
            raise ValueError(
                f"{self.name} v{self.version}: {step.name} is guarded by {step.guarded_by!r}, no gate before it"
            )
        approves = getattr(gate.spec, "action", None) if gate is not None else None
        if gate is not None and approves is not None and approves != step.action:
            raise ValueError(
                f"{self.name} v{self.version}: {step.name} does {step.action!r}, but its gate {gate.name} asks the "
                f"approver to allow {approves!r}: name the same action in both (the approver allows what runs)"
            )
        if any(s.name == step.name for s in self.steps):
            raise ValueError(f"{self.name} v{self.version}: step {step.name!r} declared twice")
        if step.third_party and not step.guarded_by and not step.templates:
            raise ValueError(
                f"{self.name} v{self.version}: {step.name} sends text to a third party: guard it with an approval, "
                "or declare the templates it sends (executions.authoring.outbound)"
            )
        earlier = {s.name for s in self.steps}
        unknown = [name for name in step.restart_with if name not in earlier]
        if unknown:
            raise ValueError(f"{self.name} v{self.version}: {step.name} restarts with {unknown}, not steps before it")
        self.steps.append(step)

    # --- reading the plan

    @property
    def first_step(self) -> str:
        return self.steps[0].name

    def get_step(self, name: str) -> Step:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(f"{self.name} v{self.version} has no step {name!r}")

    def next_step(self, name: str, output: JSON | None = None) -> str:
        """The step after ``name`` given its ``output`` ("" when the workflow completes):
        a route's chosen step (``output["route"]``), a branch's (``output["next"]``), a
        gate's declared alternative (``on_timeout``, ``on_reject``), the step's ``then``,
        else the next declared step."""
        step = self.get_step(name)
        alternative = step.alternative(output or {})
        if alternative:
            return alternative
        if (choice := step.choice) is not None:
            chosen = choice.chosen(output)
            if chosen is None:
                raise KeyError(
                    f"{self.name} v{self.version}: {step.kind} {name} chose {(output or {}).get(choice.key)!r}, "
                    f"not one of {choice.to}"
                )
            return chosen
        if step.then is not None:
            return step.then
        names = [s.name for s in self.steps]
        index = names.index(name)
        return names[index + 1] if index + 1 < len(names) else ""

    def successors(self, name: str) -> tuple[str, ...]:
        """The steps that may follow ``name``: the explicit edges of the step graph."""
        step = self.get_step(name)
        if step.choice is not None:
            return step.choice.to
        following = self.next_step(name)
        return tuple(dict.fromkeys([*((following,) if following else ()), *step.alternatives.values()]))

    def path(self, state: JSON) -> list[Step]:
        """The steps this execution takes, in order, from the first: each step's edge is
        followed with its recorded output in ``state`` (``Execution.outputs()``), so a route
        leads where the model chose. The path stops after a route whose choice is not
        recorded yet (what follows is the model's to choose) and at the end. The resume
        preview, restart from a step and replay read it (never ``steps``' order alone)."""
        path: list[Step] = []
        name = self.first_step
        seen: set[str] = set()
        while name and name not in seen:
            step = self.get_step(name)
            path.append(step)
            seen.add(name)
            if step.chooses and name not in state:
                break
            try:
                name = self.next_step(name, state.get(name))
            except KeyError:
                break
        return path

    def check_edges(self) -> None:
        """What can't run is refused at registration (raises ValueError, one sentence
        naming the workflow and the step): an edge to an undeclared step, a step nothing
        reaches from the first, an effect reachable without passing the gate guarding it."""
        if not self.steps:
            raise ValueError(f"{self.name} v{self.version} declares no step")
        names = {s.name for s in self.steps}
        for step in self.steps:
            targets = [*(step.choice.to if step.choice else ()), *step.alternatives.values()]
            targets += [step.then] if step.then else []
            unknown = [t for t in targets if t != END and t not in names]
            if unknown:
                raise ValueError(f"{self.name} v{self.version}: {step.name} leads to {unknown}, not steps of it")
        reached = self._reachable(avoiding="")
        unreached = [s.name for s in self.steps if s.name not in reached]
        if unreached:
            raise ValueError(
                f"{self.name} v{self.version}: nothing leads to {', '.join(unreached)} from {self.first_step} "
                "(a step without then= goes on to the step declared after it)"
            )
        for step in self.steps:
            if step.guarded_by and step.name in self._reachable(avoiding=step.guarded_by):
                raise ValueError(
                    f"{self.name} v{self.version}: {step.name} is guarded by {step.guarded_by}, but a path "
                    f"from {self.first_step} reaches it without passing {step.guarded_by}"
                )

    def _reachable(self, *, avoiding: str) -> set[str]:
        """The steps reached from the first by the declared edges, never through ``avoiding``."""
        seen: set[str] = set()
        todo = [self.first_step] if self.first_step != avoiding else []
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo += [t for t in self.successors(name) if t and t != avoiding and t not in seen]
        return seen

    def timeout_for(self, name: str) -> float | None:
        """How long one attempt of step ``name`` may run (None for a gate: it waits by design)."""
        try:
            step = self.get_step(name)
        except KeyError:
            return None
        if step.is_gate:
            return None
        return step.timeout_seconds or self.step_timeout_seconds or settings.RUNTIME_STEP_TIMEOUT_SECONDS

    def third_party_messages(self) -> list[tuple[str, Template]]:
        """(where, template): every message this workflow sends to a third party without an
        approval of its own (executions.authoring.outbound), for the approval page to show."""
        found = []
        for step in self.steps:
            found += [(step.label, template) for template in step.templates]
            for tool in step.agent.tools if step.agent else ():
                found += [(f"{step.label}: {tool.name}", template) for template in tool.templates]
        return found

    def label_for(self, name: str) -> str:
        try:
            return self.get_step(name).label
        except KeyError:
            return name
