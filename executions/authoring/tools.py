"""What an agent step may do: its tools, its budget, and how it is declared.

A workflow declares an agent step with ``flow.agent(name, label=…, tools=[…], …)``.
Each ``Tool`` says what it does (the model reads ``description``), its arguments as a
pydantic model (strict, unknown fields refused), whether it is read-only or an
effect, whether it needs an approval first (the gate spec, e.g.
``Approval(artifact=…, action=…)``), when it is allowed, and how its arguments are
normalised into the *effective* arguments that will run. The model only proposes;
``executions.agent.steps`` decides.

A tool whose effect sends text to a third party (``third_party=True``: a customer's
inbox) needs an approval, or declares the fixed ``templates`` it sends and takes only
bounded arguments (executions.authoring.outbound): declaring it otherwise fails at import.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pydantic

from .modelcalls import Decision, ModelRequest, ToolSpec
from .outbound import FREE_TEXT_CHARS, Template, unbounded_text
from .specs import GateSpec

JSON = dict[str, Any]


class ToolArgs(pydantic.BaseModel):
    """Base of every tool's arguments: typed, nothing coerced, unknown fields refused."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


class Refused(Exception):
    """A proposal the runtime will not run; the message is told to the model."""


class SchemaArgs:
    """A tool's arguments given as a JSON Schema rather than a ``ToolArgs`` model: a tool
    another framework declared (a pydantic-ai function's, an MCP server's input schema).
    Checked with ``jsonschema`` (draft 2020-12) and fail closed: an object's property the
    schema doesn't name is refused unless it says ``additionalProperties`` itself."""

    def __init__(self, schema: JSON) -> None:
        import jsonschema  # the framework bridges' dependency, loaded where one is declared

        self.schema = _closed(copy.deepcopy(schema) or {"type": "object", "properties": {}})
        jsonschema.Draft202012Validator.check_schema(self.schema)
        self._validator = jsonschema.Draft202012Validator(self.schema)

    def model_json_schema(self) -> JSON:
        return copy.deepcopy(self.schema)

    def problems(self, raw: Any) -> list[tuple[str, str]]:
        """What the schema refuses of ``raw``: (the field's dotted path, "" for the whole; why)."""
        found = sorted(self._validator.iter_errors(raw), key=lambda e: list(e.absolute_path))
        return [(".".join(str(p) for p in e.absolute_path), e.message) for e in found]

    def check(self, raw: JSON, tool: str) -> JSON:
        problems = self.problems(raw)
        if problems:
            shown = "; ".join(f"{path or 'arguments'}: {why}" for path, why in problems[:3])
            raise Refused(f"invalid arguments for {tool}: {shown}")
        return copy.deepcopy(raw)


def _closed(schema: JSON) -> JSON:
    if schema.get("type") == "object" and "additionalProperties" not in schema:
        schema["additionalProperties"] = False
    return schema


@dataclass(frozen=True)
class Progress:
    """What an agent step has established so far: the execution's input, and the last
    successful result of each tool (a read's answer, an effect's receipt)."""

    input: JSON
    results: dict[str, JSON]

    def done(self, tool: str) -> bool:
        return tool in self.results


@dataclass(frozen=True, kw_only=True)
class Tool:
    """One tool. ``run(args, progress)`` returns a read's result (a JSON object), or for
    an effect ``run(args, progress, key)`` returns the ``Effect`` (key given by the
    runtime, derived from the model call). ``allowed(progress)`` answers "" when the tool
    may be used now, else why not. ``normalise(args, progress)`` returns the effective
    arguments (clamped, defaulted), or raises Refused. ``fact(args, result)`` words the
    verified fact a result becomes."""

    name: str
    description: str
    args: type[ToolArgs] | SchemaArgs
    run: Callable[..., Any]
    effect: bool = False
    approval: GateSpec | None = None  # needs_approval: the gate bound to the effective arguments
    allowed: Callable[[Progress], str] | None = None
    normalise: Callable[[JSON, Progress], JSON] | None = None
    fact: Callable[[JSON, JSON], str] | None = None
    third_party: bool = False  # its effect sends text to someone outside (a customer)
    templates: tuple[Template, ...] = ()  # what it sends, when no approval guards it

    def __post_init__(self) -> None:
        if not self.third_party:
            return
        if not self.effect:
            raise ValueError(f"tool {self.name}: third_party applies to effects")
        if self.needs_approval:
            return
        if not self.templates:
            raise ValueError(
                f"tool {self.name} sends text to a third party: it needs an approval, or the templates it sends"
            )
        if isinstance(self.args, SchemaArgs):
            raise ValueError(f"tool {self.name} sends text to a third party: it needs an approval")
        free = unbounded_text(self.args)
        if free:
            raise ValueError(
                f"tool {self.name} sends text to a third party without an approval, so its arguments must be "
                f"bounded (an enum, or a pattern with max_length at most {FREE_TEXT_CHARS}): {', '.join(free)} "
                "is free text"
            )

    @property
    def needs_approval(self) -> bool:
        return self.approval is not None

    @property
    def spec(self) -> ToolSpec:
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    def why_not(self, progress: Progress) -> str:
        return self.allowed(progress) if self.allowed is not None else ""

    def effective_args(self, raw: JSON | None, progress: Progress) -> JSON:
        """Validate the proposed arguments and normalise them. Fail closed: anything the
        schema doesn't accept exactly raises Refused, naming the problem."""
        if raw is None:
            raise Refused(f"the arguments of {self.name} are not a JSON object")
        if isinstance(self.args, SchemaArgs):
            args = self.args.check(raw, self.name)
            return self.normalise(args, progress) if self.normalise is not None else args
        try:
            args = self.args.model_validate(raw).model_dump(mode="json")
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            raise Refused(f"invalid arguments for {self.name}: {problems}") from None
        return self.normalise(args, progress) if self.normalise is not None else args


@dataclass(frozen=True, kw_only=True)
class Budget:
    """What one visit of an agent step may spend before a person must look
    (needs_attention ``budget_exceeded``): model calls and tokens in this round, cost
    when the provider reports it, seconds of work (waits for people not counted),
    refused proposals, and the context's token budget (None: RUNTIME_CONTEXT_TOKENS).
    ``conversation_tokens``: the round's conversation (the task, the tool calls and their
    results) past it is compacted into a progress note before the next call
    (executions.agent.compaction); None (the default): half the model's context window
    (``RUNTIME_MODEL_CONTEXT_WINDOWS``); 0: never compacted."""

    max_calls: int = 12
    max_tokens: int = 60_000
    max_cost: float | None = None
    max_seconds: float = 300
    max_refusals: int = 3
    context_tokens: int | None = None
    conversation_tokens: int | None = None


@dataclass(frozen=True, kw_only=True)
class AgentSpec:
    """An agent step: the template (``prompt_id``, the step's ``prompt_version``), the
    task ``instruction(ctx)``, its tools, its budget, when it is done (``done_when``:
    a final answer before that needs a person), and how the offline model plays it."""

    prompt_id: str
    instruction: Callable[[Any], str]
    tools: tuple[Tool, ...]
    budget: Budget = field(default_factory=Budget)
    done_when: Callable[[Progress], bool] | None = None
    offline_policy: Callable[[ModelRequest], Decision] | None = None

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)
