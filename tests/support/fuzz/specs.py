"""What the workflow fuzzer generates (S60): plain, frozen data, no Django.

A ``Case`` is one fuzz example: a workflow (``Flow``, a list of blocks), the workflow
its children steps start (``child``), and the ``Schedule`` the world plays against it —
how many executions start, how many workers run, which of them die where (SIGKILL at a
failpoint, or after a while), which Celery messages are duplicated, which decisions and
signals arrive twice, which provider call fails. The renderer (``render``) turns the
flows into a workflow module; the runner (``runner``) plays the schedule; the
strategies (``strategies``) draw cases for hypothesis, which shrinks a failing one
block by block.

A block is one piece of a business process, a few steps long; its steps are named
after its position (``s3_review``: block 3 of the main workflow; ``c1_notify``: block 1
of the child workflow), so a kill names a step and a failing case reads as a list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# The sandbox's services an effect may call: /notify and /reports/publish de-duplicate
# on the Idempotency-Key; /orders does or doesn't, by the sandbox's configuration.
Provider = Literal["notify", "orders", "publish"]
Verdict = Literal["approve", "reject", "request_changes"]
# Where a worker may be SIGKILLed (executions/engine/failpoints.py), or "timer": after a while.
Point = Literal[
    "before_step",
    "after_step",
    "before_effect_call",
    "after_effect_call",
    "before_model_call",
    "after_model_call",
    "before_parent_wake",
    "timer",
]
Fault = Literal["error_500", "rate_limit", "commit_then_hang", "timeout"]

ENDPOINTS: dict[str, str] = {"notify": "/notify", "orders": "/orders", "publish": "/reports/publish"}


@dataclass(frozen=True)
class Compute:
    """A compute step; with ``artifact``, it also saves an artifact nothing approves."""

    artifact: bool = False


@dataclass(frozen=True)
class Act:
    """An effect at ``provider`` keyed by the execution and the step (unguarded), or by the
    approved version (guarded, inside ``Approve``). ``honors_key``: the workflow says the
    provider de-duplicates (never said of a provider that doesn't)."""

    provider: Provider = "notify"
    honors_key: bool = True
    # Visits: above 1, a branch after it (``<block>_again``) leads back to it until it ran
    # this many times (a loop, docs/design.md §4 "Control flow"), each visit keyed by its number.
    passes: int = 1


@dataclass(frozen=True)
class Approve:
    """A draft (an artifact), an approval gate on it, then the effects it guards.
    ``decisions``: the manager's answer round by round (``request_changes`` redrafts);
    each is delivered ``1 + duplicates`` times, again under the same event id or new ones."""

    effects: tuple[Act, ...] = (Act(),)
    decisions: tuple[Verdict, ...] = ("approve",)
    duplicates: int = 0
    same_event: bool = True


@dataclass(frozen=True)
class Wait:
    """A wait for a signal (``signal``) or a timer, at most ``timeout`` seconds; with
    ``send`` the signal is delivered ``1 + duplicates`` times."""

    signal: bool = True
    timeout: float = 3600
    send: bool = True
    duplicates: int = 0
    same_event: bool = True


@dataclass(frozen=True)
class Agent:
    """An agent step whose (offline) model calls one effect tool that needs an approval of
    its arguments, then proposes the same call ``repeats`` more times before answering
    (S49). ``provider``: where the tool's effect goes (one that de-duplicates on the key,
    the approval's: ``<ref>:approval:<n>:<tool>``). ``decisions`` etc. as ``Approve``'s."""

    provider: Literal["notify", "publish"] = "notify"
    repeats: int = 0
    decisions: tuple[Verdict, ...] = ("approve",)
    duplicates: int = 0
    same_event: bool = True


@dataclass(frozen=True)
class Children:
    """A children step starting ``count`` executions of the case's child workflow."""

    count: int = 1


Block = Compute | Act | Approve | Agent | Wait | Children


@dataclass(frozen=True)
class Flow:
    blocks: tuple[Block, ...] = (Compute(),)
    # Seconds from its start (``Workflow(deadline_seconds=…)``): past it, an execution stops
    # (failed, or with a person when an effect of its step is in doubt). None: no deadline.
    deadline: float | None = None


@dataclass(frozen=True)
class Kill:
    """SIGKILL a worker when it reaches ``point`` at ``step`` (it crashes itself there), or,
    for ``timer``, ``seconds`` after the previous kill (or the start)."""

    point: Point = "timer"
    step: str = ""  # for a model call: "<step>:c<n>", its n-th call
    seconds: float = 1.0

    @property
    def failpoint(self) -> str:
        """The ``RUNTIME_FAILPOINTS`` entry that crashes a worker here ("" for a timer)."""
        if self.point == "timer":
            return ""
        name = self.point if self.point == "before_parent_wake" else f"{self.point}:{self.step}"
        return f"{name}=crash"

    def __str__(self) -> str:
        return f"after {self.seconds:g} s" if self.point == "timer" else self.failpoint.removesuffix("=crash")


@dataclass(frozen=True)
class Schedule:
    """What the world does while the case runs."""

    starts: int = 1  # executions of the main workflow
    restart_start: bool = False  # each start posted twice with its idempotency key
    workers: int = 1
    kills: tuple[Kill, ...] = ()
    duplicate_messages: int = 0  # executions.advance sent again for live executions
    faults: tuple[tuple[Fault, Provider], ...] = ()  # the next call of that provider fails so
    orders_dedupe: bool = True  # the sandbox's order service honours Idempotency-Key


@dataclass(frozen=True)
class Case:
    main: Flow = field(default_factory=Flow)
    child: Flow = field(default_factory=Flow)
    schedule: Schedule = field(default_factory=Schedule)

    @property
    def has_children(self) -> bool:
        return any(isinstance(b, Children) for b in self.main.blocks)


@dataclass(frozen=True)
class StepInfo:
    """A step a block renders: its name, its kind (as the engine calls it), its block."""

    name: str
    kind: str
    block: Block


def steps_of(flow: Flow, prefix: str) -> list[StepInfo]:
    """Every step ``flow`` renders, in order; ``prefix`` is ``s`` (main) or ``c`` (child)."""
    found: list[StepInfo] = []
    for i, block in enumerate(flow.blocks, start=1):
        base = f"{prefix}{i}"
        match block:
            case Compute():
                found.append(StepInfo(f"{base}_compute", "compute", block))
            case Act(provider=provider, passes=passes):
                found.append(StepInfo(f"{base}_{provider}", "effect", block))
                if passes > 1:
                    found.append(StepInfo(f"{base}_again", "branch", block))
            case Approve(effects=effects):
                found.append(StepInfo(f"{base}_draft", "compute", block))
                found.append(StepInfo(f"{base}_review", "approval", block))
                found += [StepInfo(f"{base}_apply{j}", "effect", act) for j, act in enumerate(effects, start=1)]
            case Agent():
                found.append(StepInfo(f"{base}_agent", "agent", block))
            case Wait():
                found.append(StepInfo(f"{base}_wait", "wait", block))
            case Children():
                found.append(StepInfo(f"{base}_kids", "children", block))
    return found


def describe(case: Case) -> str:
    """The case in a few lines: what a failure report opens with."""
    s = case.schedule
    lines = [
        "main: " + _flow(case.main),
        *(["child: " + _flow(case.child)] if case.has_children else []),
        f"starts: {s.starts}{' (each posted twice)' if s.restart_start else ''}; workers: {s.workers}; "
        f"order service {'de-duplicates' if s.orders_dedupe else 'does not de-duplicate'}",
        "kills: " + (", ".join(str(k) for k in s.kills) or "none"),
        f"duplicate advance messages: {s.duplicate_messages}; faults: "
        + (", ".join(f"{fault} at {ENDPOINTS[p]}" for fault, p in s.faults) or "none"),
    ]
    return "\n".join(lines)


def _flow(flow: Flow) -> str:
    blocks = ", ".join(_block(b) for b in flow.blocks)
    return blocks + (f"; deadline {flow.deadline:g} s" if flow.deadline is not None else "")


def _block(block: Block) -> str:
    match block:
        case Compute(artifact=artifact):
            return "compute" + (" (saves an artifact)" if artifact else "")
        case Act(provider=provider, honors_key=honors, passes=passes):
            looped = f", in a loop of {passes} visits" if passes > 1 else ""
            return f"effect at {ENDPOINTS[provider]}" + ("" if honors else " (not relying on the key)") + looped
        case Approve(effects=effects, decisions=decisions, duplicates=dups, same_event=same):
            again = f", each sent {1 + dups}× ({'same' if same else 'new'} event id)" if dups else ""
            return f"approval [{' → '.join(decisions)}{again}] guarding {len(effects)} effect(s)"
        case Agent(provider=provider, repeats=repeats, decisions=decisions, duplicates=dups, same_event=same):
            again = f", each sent {1 + dups}× ({'same' if same else 'new'} event id)" if dups else ""
            return (
                f"agent calling an approved tool at {ENDPOINTS[provider]} [{' → '.join(decisions)}{again}], "
                f"then proposing it {repeats} more time(s)"
            )
        case Wait(signal=signal, timeout=timeout, send=send, duplicates=dups, same_event=same):
            if not signal:
                return f"timer {timeout:g} s"
            sent = f"sent {1 + dups}× ({'same' if same else 'new'} event id)" if send else "never sent"
            return f"wait for a signal ({sent}, timeout {timeout:g} s)"
        case Children(count=count):
            return f"children ×{count}"
    return repr(block)
