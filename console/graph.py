"""The workflow graph on the execution page: the pinned version's steps as nodes in
declared order, their edges, and where this execution stands on each.

Three parts, each a plain function:

- ``progress_of`` reads the record once (the execution's step runs; its children and
  approval requests come from the page's snapshot) into a ``Progress``;
- ``step_states`` (pure) says, per step, what the execution did there: done, the
  current step (running, retrying, parked at a gate, needing attention, paused),
  failed or cancelled there, skipped (the path taken leaves it out: a route chose
  another branch, an edge jumps over it) or not reached (still ahead) — and the
  visit it is on (each succeeded run is one visit: a loop or changes requested run a
  step again);
- ``layout`` (pure) places the nodes in one column (it fits a phone) and draws each
  edge: the next step straight below, a jump forward in a lane on the right, an edge
  back (a loop, "changes requested") in a lane on the left, and an End node.

The template (``executions/_graph.html``) draws the ``Graph`` as inline SVG with
presentation attributes only (the CSP allows no inline style) and a text list of the
same facts. Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import models

from executions.authoring import registry
from executions.authoring.workflow import END, Step, StepKind, Workflow
from executions.models import Execution, Status, StepRun

# Geometry, in the SVG's user units (its viewBox scales them to the width it is given).
NODE_W, NODE_H, GAP, TOP, LANE, MARGIN = 290, 46, 24, 8, 12, 8
END_W, END_H = 84, 26
MAX_LABEL = 32  # characters of a label shown in a node (the whole label is its tooltip and in the list)
MAX_META = 40


class NodeState(models.TextChoices):
    DONE = "done", "done"
    CURRENT = "current", "current"  # running, queued or retrying: a worker has it or will
    PARKED = "parked", "parked"  # at a gate (approval, wait, children) or paused: no worker held
    ATTENTION = "attention", "needs attention"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"
    SKIPPED = "skipped", "skipped"
    NOT_REACHED = "not_reached", "not reached"


# What the current step's node says, by the execution's status.
_AT_CURRENT: Mapping[str, tuple[NodeState, str]] = {
    Status.PENDING: (NodeState.CURRENT, "queued"),
    Status.RUNNING: (NodeState.CURRENT, "running"),
    Status.RETRY_PENDING: (NodeState.CURRENT, "retrying"),
    Status.AWAITING_APPROVAL: (NodeState.PARKED, "awaiting approval"),
    Status.WAITING: (NodeState.PARKED, "waiting"),
    Status.PAUSED: (NodeState.PARKED, "paused"),
    Status.NEEDS_ATTENTION: (NodeState.ATTENTION, "needs attention"),
    Status.FAILED: (NodeState.FAILED, "failed here"),
    Status.CANCELLED: (NodeState.CANCELLED, "cancelled here"),
}


@dataclass(frozen=True)
class Tone:
    """A state's colours on the white card (text ≥ 4.5:1 on ``fill``, ``stroke`` ≥ 3:1 on
    white) and its dash pattern: the state also reads from the glyph, the dash and the words."""

    stroke: str
    fill: str
    text: str
    dash: str = ""
    width: float = 1.5


TONES: Mapping[str, Tone] = {
    NodeState.DONE: Tone("#146c3a", "#ddf5e6", "#14613a"),
    NodeState.CURRENT: Tone("#2447b8", "#e4ecff", "#2447b8", width=3),
    NodeState.PARKED: Tone("#8a5a00", "#fff4dc", "#7a4f00", width=3),
    NodeState.ATTENTION: Tone("#b02a2a", "#fbe3e3", "#8d1f1f", width=3),
    NodeState.FAILED: Tone("#b02a2a", "#fbe3e3", "#8d1f1f", width=3),
    NodeState.CANCELLED: Tone("#474f5f", "#eef0f6", "#3d4660", width=3),
    NodeState.SKIPPED: Tone("#6b7385", "#f6f7fb", "#474f5f", dash="6 4"),
    NodeState.NOT_REACHED: Tone("#6b7385", "#ffffff", "#555d6e", dash="2 3"),
}

# Each state's glyph, drawn in a 16-unit box centred on (0, 0).
GLYPHS: Mapping[str, str] = {
    NodeState.DONE: "M-5 0 L-1.5 4 L5.5 -4.5",
    NodeState.CURRENT: "M-3.5 -5 L5 0 L-3.5 5 Z",
    NodeState.PARKED: "M-3.5 -5 V5 M3.5 -5 V5",
    NodeState.ATTENTION: "M0 -5.5 V1.5 M0 4 V5.5",
    NodeState.FAILED: "M-4.5 -4.5 L4.5 4.5 M4.5 -4.5 L-4.5 4.5",
    NodeState.CANCELLED: "M-4.5 4.5 L4.5 -4.5",
    NodeState.SKIPPED: "M-5 0 H5",
    NodeState.NOT_REACHED: "",
}


# --- what the record says


@dataclass(frozen=True, kw_only=True)
class Progress:
    """What the record holds about an execution's steps, for ``step_states``."""

    status: str
    current: str  # the step it is at ("" once completed)
    round: int = 1
    failed_attempts: int = 0
    succeeded: Mapping[str, frozenset[int]] = field(default_factory=dict)  # step → rounds it succeeded in
    outputs: Mapping[str, Any] = field(default_factory=dict)  # Execution.outputs(): carried ones included
    children: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # step → its children's statuses
    loops: Mapping[str, str] = field(default_factory=dict)  # approval step → where changes requested lead


def progress_of(
    execution: Execution,
    *,
    children: Iterable[Execution] = (),
    requests: Iterable[Any] = (),
    runs: Iterable[tuple[str, int]] | None = None,
) -> Progress:
    """The execution's ``Progress``: its succeeded runs (read here unless ``runs`` gives
    them as (step, round)), its ``children`` and approval ``requests`` (the page's
    snapshot has them)."""
    if runs is None:
        runs = StepRun.objects.filter(execution=execution, outcome=StepRun.Outcome.SUCCEEDED).values_list(
            "step", "round"
        )
    succeeded: dict[str, set[int]] = {}
    for step, round_ in runs:
        succeeded.setdefault(step, set()).add(round_)
    kids: dict[str, list[str]] = {}
    for child in children:
        kids.setdefault(child.parent_step, []).append(child.status)
    # Where changes requested lead: the gate's redraft_from, else the step that drafted the version.
    loops = {r.step: r.artifact_version.produced_by_step for r in requests if r.execution_id == execution.pk}
    return Progress(
        status=execution.status,
        current=execution.current_step,
        round=execution.round,
        failed_attempts=execution.failed_attempts,
        succeeded={step: frozenset(rounds) for step, rounds in succeeded.items()},
        outputs=execution.outputs(),
        children={step: tuple(statuses) for step, statuses in kids.items()},
        loops=loops,
    )


@dataclass(frozen=True, kw_only=True)
class StepState:
    state: NodeState
    words: str  # what the node says about it: "done", "awaiting approval", "skipped"…
    visit: int  # the visit it is on (current), or how many it had (0: none)
    notes: tuple[str, ...] = ()


def _ahead(flow: Workflow, start: str) -> set[str]:
    """The steps the execution may still run from ``start`` (``start`` excluded unless an
    edge leads back to it): every edge followed, a route's every choice."""
    seen: set[str] = set()
    todo = list(flow.successors(start)) if start else []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += flow.successors(name)
    return seen


def step_states(flow: Workflow, progress: Progress) -> dict[str, StepState]:
    """Each step's state (see the module's docstring), by step name, in declared order."""
    terminal = progress.status in (Status.COMPLETED, Status.FAILED, Status.CANCELLED)
    current = progress.current if progress.status != Status.COMPLETED else ""
    ahead = _ahead(flow, current)
    chosen = _route_choices(flow, progress.outputs)
    states: dict[str, StepState] = {}
    for step in flow.steps:
        rounds = progress.succeeded.get(step.name, frozenset())
        visits = len(rounds)
        carried = step.name in progress.outputs and not rounds
        notes = list(_notes(flow, step, progress, chosen, carried))
        if step.name == current:
            state, words = _AT_CURRENT.get(progress.status, (NodeState.CURRENT, str(progress.status)))
            if step.kind == StepKind.CHILDREN and progress.status == Status.WAITING:
                words = "waiting for its children"
            if progress.status == Status.RETRY_PENDING and progress.failed_attempts:
                n = progress.failed_attempts
                words = f"retrying after {n} failed attempt{'s' if n > 1 else ''}"
            visit = visits if progress.round in rounds else visits + 1
        elif progress.round in rounds:
            state, words, visit = NodeState.DONE, "done", visits
        elif step.name in ahead and not terminal:
            state, words, visit = NodeState.NOT_REACHED, "not reached", visits
            if visits:
                notes.append(f"done {visits}× before, runs again")
        elif rounds or carried:
            state, words, visit = NodeState.DONE, "done", visits
        elif step.name in ahead:  # after the step a failed or cancelled execution stopped at
            state, words, visit = NodeState.NOT_REACHED, "not reached", 0
        else:
            state, words, visit = NodeState.SKIPPED, "skipped", 0
            notes.append(_skipped_because(step.name, flow, chosen))
        states[step.name] = StepState(state=state, words=words, visit=visit, notes=tuple(notes))
    return states


def _route_choices(flow: Workflow, outputs: Mapping[str, Any]) -> dict[str, str]:
    """step that chooses (a route, a branch) → the step it chose (recorded choices only)."""
    chosen = {}
    for step in flow.steps:
        if step.choice is not None and (choice := step.choice.chosen(outputs.get(step.name))):
            chosen[step.name] = choice
    return chosen


def _skipped_because(name: str, flow: Workflow, chosen: Mapping[str, str]) -> str:
    for source, choice in chosen.items():
        if name in flow.get_step(source).choice.to and name != choice:  # type: ignore[union-attr]
            return f"{flow.label_for(source)} chose {flow.label_for(choice)}"
    return "not on the path taken"


def _notes(flow: Workflow, step: Step, progress: Progress, chosen: Mapping[str, str], carried: bool) -> Iterable[str]:
    if carried:
        yield "output reused from the execution it restarts"
    if step.name in chosen:
        yield f"chose {flow.label_for(chosen[step.name])}"
    statuses = progress.children.get(step.name)
    if statuses:
        yield _children_sentence(statuses)


def _children_sentence(statuses: tuple[str, ...]) -> str:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    parts = ", ".join(f"{n} {Status(s).label.lower()}" for s, n in sorted(counts.items()))
    return f"{len(statuses)} child{'ren' if len(statuses) > 1 else ''}: {parts}"


# --- where things go


@dataclass(frozen=True, kw_only=True)
class Node:
    name: str
    label: str
    short_label: str
    kind: str
    state: str
    words: str
    visit: int
    notes: tuple[str, ...]
    meta: str  # the node's second line: kind · state · visit (clipped)
    x: float
    y: float
    tone: Tone
    glyph: str
    marker: str  # the marker's shape: circle (a step), square (a gate) or diamond (a route)
    leads_to: tuple[str, ...] = ()  # its edges in words: "then Publishing", "changes requested: back to Analyzing"

    # What the template places (it does no arithmetic).
    w, h = NODE_W, NODE_H

    @property
    def cy(self) -> float:
        return self.y + NODE_H / 2

    @property
    def text_x(self) -> float:
        return self.x + 40

    @property
    def label_y(self) -> float:
        return self.y + 19

    @property
    def meta_y(self) -> float:
        return self.y + 36

    @property
    def glyph_at(self) -> str:
        return f"translate({self.x + 20} {self.cy})"

    @property
    def glyph_fill(self) -> str:
        return self.tone.stroke if self.state == NodeState.CURRENT else "none"

    @property
    def marker_path(self) -> str:
        cx, cy = self.x + 20, self.cy
        if self.marker == "diamond":
            return f"M{cx} {cy - 12} L{cx + 12} {cy} L{cx} {cy + 12} L{cx - 12} {cy} Z"
        if self.marker == "square":
            return f"M{cx - 10} {cy - 10} H{cx + 10} V{cy + 10} H{cx - 10} Z"
        return f"M{cx - 10} {cy} A10 10 0 1 0 {cx + 10} {cy} A10 10 0 1 0 {cx - 10} {cy} Z"

    @property
    def sentence(self) -> str:
        """The node in words, for the text list and the tooltip."""
        visit = f", visit {self.visit}" if self.visit else ""
        notes = "".join(f"; {n}" for n in [*self.notes, *self.leads_to])
        return f"{self.label} ({self.kind}): {self.words}{visit}{notes}"


@dataclass(frozen=True, kw_only=True)
class Edge:
    source: str
    target: str  # a step's name, or END ("") for the End node
    kind: str  # next (straight down), jump (forward, right lane), back (a loop, left lane), changes (changes requested)
    taken: bool
    d: str  # the SVG path
    label: str = ""  # a route's choice, "changes requested", "then"


@dataclass(frozen=True, kw_only=True)
class Graph:
    workflow: str
    version: int
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    width: float
    height: float
    end_x: float
    end_y: float
    completed: bool
    round: int

    @property
    def summary(self) -> str:
        """One sentence for the SVG's title: how many steps, where it stands."""
        at = [n for n in self.nodes if n.state not in (NodeState.DONE, NodeState.SKIPPED, NodeState.NOT_REACHED)]
        where = f"; at {at[0].label} ({at[0].words}, visit {at[0].visit})" if at else ""
        done = sum(1 for n in self.nodes if n.state == NodeState.DONE)
        skipped = sum(1 for n in self.nodes if n.state == NodeState.SKIPPED)
        ahead = sum(1 for n in self.nodes if n.state == NodeState.NOT_REACHED)
        end = "; completed" if self.completed else ""
        return (
            f"Workflow graph of {self.workflow} v{self.version}, {len(self.nodes)} steps: {done} done, "
            f"{skipped} skipped, {ahead} not reached{where}{end}; round {self.round}"
        )

    end_w, end_h = END_W, END_H

    @property
    def end_text_x(self) -> float:
        return self.end_x + END_W / 2

    @property
    def end_text_y(self) -> float:
        return self.end_y + END_H / 2 + 4


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _lanes(spans: list[tuple[int, int]]) -> list[int]:
    """A lane (1, 2, …) per span (lo, hi) of node indexes, so that no two spans sharing
    a lane overlap: the shortest spans nearest the nodes."""
    order = sorted(range(len(spans)), key=lambda i: (spans[i][1] - spans[i][0], spans[i][0]))
    taken: dict[int, list[tuple[int, int]]] = {}
    lanes = [0] * len(spans)
    for i in order:
        lo, hi = spans[i]
        lane = 1
        while any(lo <= b and a <= hi for a, b in taken.get(lane, [])):
            lane += 1
        taken.setdefault(lane, []).append((lo, hi))
        lanes[i] = lane
    return lanes


_ALTERNATIVE_LABELS = {"timed_out": "on timeout", "reject": "on reject", "failed": "on failure"}


def _edges_of(flow: Workflow, progress: Progress, states: Mapping[str, StepState]) -> list[tuple[str, str, str, bool]]:
    """(source, target, label, taken): every declared edge, END as "" — a route's and a
    branch's every choice (the one recorded taken), a gate's other way on (a wait's
    timeout, an approval's reject) beside its usual edge —, then each approval
    gate's way back when changes are requested (where the spec or the record says; taken
    once the step it leads back to is on its second visit)."""
    outputs = progress.outputs
    index = {s.name: i for i, s in enumerate(flow.steps)}
    found = []
    for step in flow.steps:
        done = step.name in outputs
        if step.choice is not None:  # a choice, recorded in its output (a route's {"route"}, a branch's {"next"})
            options = step.choice.to
            chosen = step.choice.chosen(outputs.get(step.name)) if done else None
            # Its latest visit chose ``chosen``; each earlier visit went round again, back up the graph.
            looped = step.name in states and states[step.name].visit > 1
            for t in options:
                back = looped and bool(t) and index.get(t, len(index)) <= index[step.name]
                taken = done and (t == chosen or back)
                found.append((step.name, t, "chosen" if done and t == chosen else "option", taken))
            continue
        other = step.alternative(outputs.get(step.name) or {}) if done else None  # a timeout, a reject
        following = flow.next_step(step.name)
        found.append((step.name, following, "then" if step.then is not None else "", done and other is None))
        for outcome, target in step.alternatives.items():
            found.append((step.name, target, _ALTERNATIVE_LABELS[outcome], done and other == target))
    for step in flow.steps:
        if step.kind != StepKind.APPROVAL:
            continue
        back = getattr(step.spec, "redraft_from", "") or progress.loops.get(step.name, "")
        if back and back != step.name and back in states:
            found.append((step.name, back, "changes requested", states[back].visit > 1))
    return found


def layout(flow: Workflow, progress: Progress | None = None) -> Graph:
    """The graph of ``flow``; with ``progress``, each node's state and visit (without,
    every step is "not reached": the plan alone)."""
    if progress is None:
        progress = Progress(status=Status.PENDING, current="")
        states = {s.name: StepState(state=NodeState.NOT_REACHED, words="not reached", visit=0) for s in flow.steps}
    else:
        states = step_states(flow, progress)
    index = {s.name: i for i, s in enumerate(flow.steps)}
    end_index = len(flow.steps)
    raw = _edges_of(flow, progress, states)

    def at(name: str) -> int:
        return index[name] if name else end_index

    forward = [(i, e) for i, e in enumerate(raw) if at(e[1]) > at(e[0]) + 1]
    backward = [(i, e) for i, e in enumerate(raw) if at(e[1]) <= at(e[0])]
    right = dict(zip([i for i, _ in forward], _lanes([(at(e[0]), at(e[1])) for _, e in forward]), strict=True))
    left = dict(zip([i for i, _ in backward], _lanes([(at(e[1]), at(e[0])) for _, e in backward]), strict=True))
    x0 = MARGIN + LANE * (max(left.values(), default=0) + 1)
    x1 = x0 + NODE_W
    width = x1 + LANE * (max(right.values(), default=0) + 1) + MARGIN

    def top(i: int) -> float:
        return TOP + i * (NODE_H + GAP)

    leads: dict[str, list[str]] = {}
    for source, target, label, _taken in raw:
        name = flow.label_for(target) if target else "the end"
        if label in ("chosen", "option"):
            said = f"may choose {name}" + (" (chosen)" if label == "chosen" else "")
        elif label == "changes requested":
            said = f"changes requested: back to {name}"
        else:
            said = f"then {name}"
        leads.setdefault(source, []).append(said)
    nodes = []
    for i, step in enumerate(flow.steps):
        state = states[step.name]
        if state.state == NodeState.NOT_REACHED:
            visit = f" · next visit {state.visit + 1}" if state.visit else ""
        elif state.visit and (state.visit > 1 or state.state != NodeState.DONE):
            visit = f" · visit {state.visit}"
        else:
            visit = ""
        meta = f"{step.kind} · {state.words}{visit}"
        nodes.append(
            Node(
                name=step.name,
                label=step.label,
                short_label=_clip(step.label, MAX_LABEL),
                kind=str(step.kind),
                state=state.state,
                words=state.words,
                visit=state.visit,
                notes=state.notes,
                meta=_clip(meta, MAX_META),
                x=x0,
                y=top(i),
                tone=TONES[state.state],
                glyph=GLYPHS[state.state],
                marker="diamond" if step.route is not None else "square" if step.is_gate else "circle",
                leads_to=tuple(leads.get(step.name, ())),
            )
        )
    end_x, end_y = x0 + (NODE_W - END_W) / 2, top(end_index) + (NODE_H - END_H) / 2
    edges = []
    for i, (source, target, label, taken) in enumerate(raw):
        s, t = at(source), at(target)
        y_out = top(s) + NODE_H  # below the source
        if i in right:  # forward past the next node: out of the right side, into the target's right side
            lane = x1 + LANE * right[i]
            y_in = top(t) + NODE_H / 2 if target else end_y + END_H / 2
            x_in = x1 if target else end_x + END_W
            d = f"M{x1} {top(s) + NODE_H / 2 + 6} H{lane} V{y_in} H{x_in + 2}"
            kind = "jump"
        elif i in left:  # back: out of the left side, into the target's left side
            lane = x0 - LANE * left[i]
            d = f"M{x0} {top(s) + NODE_H / 2 + 6} H{lane} V{top(t) + NODE_H / 2 - 6} H{x0 - 2}"
            kind = "changes" if label == "changes requested" else "back"
        else:  # the next node (or End) straight below
            cx = x0 + NODE_W / 2
            y_in = top(t) if target else end_y
            d = f"M{cx} {y_out} V{y_in - 2}"
            kind = "next"
        edges.append(Edge(source=source, target=target, kind=kind, taken=taken, d=d, label=label))
    return Graph(
        workflow=flow.name,
        version=flow.version,
        nodes=tuple(nodes),
        edges=tuple(edges),
        width=width,
        height=top(end_index) + NODE_H + TOP,
        end_x=end_x,
        end_y=end_y,
        completed=progress.status == Status.COMPLETED,
        round=progress.round,
    )


def graph_for(
    execution: Execution,
    *,
    children: Iterable[Execution] = (),
    requests: Iterable[Any] = (),
    runs: Iterable[tuple[str, int]] | None = None,
) -> Graph | None:
    """The execution page's graph: its pinned version laid out with its progress
    (``progress_of``'s arguments); None when that version is not deployed here, or the
    record names a step it doesn't have (the page still shows the steps as recorded)."""
    try:
        flow = registry.get(execution.workflow, execution.workflow_version)
        return layout(flow, progress_of(execution, children=children, requests=requests, runs=runs))
    except (registry.UnknownWorkflow, KeyError):
        return None


__all__ = ["END", "Edge", "Graph", "Node", "NodeState", "Progress", "graph_for", "layout", "progress_of", "step_states"]
