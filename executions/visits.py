"""The visits of an execution (docs/design.md §4, "Control flow people write"): each pass through
a step is a *visit* — a loop, or changes requested, leads back to a step and it runs
again with its own output, model calls, approval and wait.

``done`` lists the visits an execution completed, in the order they completed (the ones
a restart carried over first); ``ahead`` the ones a resume would make, from the current
step's next visit on, as far as the edges are known; ``visit_numbers`` numbers each
attempt (``StepRun``) with the visit it belongs to; ``visit_of`` says which visit of its
step something written at a given time (an action, an artifact version) belongs to.
The resume preview, restart from a step, ``keel replay`` and the page's timeline all
read them, so each says "visit 2" of the same pass. Read only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from artifacts.models import ArtifactVersion

from .authoring.workflow import END, Step, Workflow
from .models import Execution, Status, StepRun


@dataclass(frozen=True)
class Visit:
    """One pass through one step: done (its succeeded ``run``, or ``carried`` over by a
    restart from the execution it continues), or ahead (neither)."""

    step: Step
    visit: int  # 1, 2, … its pass through the step
    run: StepRun | None = None
    carried: bool = False
    output: Any = None  # what it produced (done visits)

    @property
    def name(self) -> str:
        return self.step.name

    @property
    def done(self) -> bool:
        return self.run is not None or self.carried


def done(workflow: Workflow, execution: Execution) -> list[Visit]:
    """Every visit ``execution`` completed, oldest first: the ones a restart carried over
    (``context["carried_visits"]``, else ``context["carried"]``), then each succeeded step
    run. A step the workflow no longer declares is left out (replay reports it)."""
    carried = _carried(workflow, execution.context or {})
    declared = {step.name: step for step in workflow.steps}
    count: Counter[str] = Counter()
    out: list[Visit] = []
    for name, output in carried:
        if name in declared:
            count[name] += 1
            out.append(Visit(declared[name], count[name], carried=True, output=output))
    runs = list(execution.succeeded_runs())
    # Rows written before issue 25 kept every output in ``context["state"]``: one without a run is done.
    legacy = (execution.context or {}).get("state") or {}
    ran = {run.step for run in runs} | set(count)
    for name, output in _in_order(workflow, {k: v for k, v in legacy.items() if k not in ran}):
        if name in declared:
            count[name] += 1
            out.append(Visit(declared[name], count[name], carried=True, output=output))
    for run in runs:
        if run.step in declared:
            count[run.step] += 1
            out.append(Visit(declared[run.step], count[run.step], run=run, output=run.output))
    return out


def ahead(workflow: Workflow, execution: Execution, done_visits: list[Visit] | None = None) -> list[Visit]:
    """The visits a resume of ``execution`` would make, in order: the current step's next
    visit, then the steps its edges lead to, until the end, a step that chooses (a route,
    a branch, a gate with another way on: what follows is its to choose) or a step already
    in the list (a loop: it is visited again after). Empty once completed, and when the
    current step is not the workflow's."""
    if execution.status == Status.COMPLETED or not execution.current_step:
        return []
    done_visits = done(workflow, execution) if done_visits is None else done_visits
    count = Counter(v.name for v in done_visits)
    declared = {step.name for step in workflow.steps}
    out: list[Visit] = []
    name = execution.current_step
    while name and name != END and name in declared and name not in {v.name for v in out}:
        step = workflow.get_step(name)
        out.append(Visit(step, count[name] + 1))
        if step.chooses:
            break
        name = workflow.next_step(name)
    return out


def visit_numbers(runs: Iterable[StepRun], *, carried: Counter[str] | None = None) -> dict[int, int]:
    """run id → the visit it belongs to, for ``runs`` oldest first (every attempt, failed
    ones included: an attempt belongs to the visit its step's next success completes).
    ``carried``: visits a restart carried over, by step, counted before the first run."""
    succeeded: Counter[str] = Counter(carried or {})
    out = {}
    for run in runs:
        out[run.pk] = succeeded[run.step] + 1
        if run.outcome == StepRun.Outcome.SUCCEEDED:
            succeeded[run.step] += 1
    return out


def carried_counts(execution: Execution) -> Counter[str]:
    """How many visits of each step a restart carried over into ``execution`` (not its own
    runs a migration carried over: those are numbered as the runs they are)."""
    context = execution.context or {}
    carried = context.get("carried_visits") or [[name, None] for name in context.get("carried", {})]
    counts = Counter(name for name, _ in carried)
    through = context.get("migrated_through")
    if through:  # a migration carried its own earlier runs too: those stay numbered as its runs
        own = StepRun.objects.filter(execution_id=execution.pk, outcome=StepRun.Outcome.SUCCEEDED, pk__lte=through)
        counts.subtract(Counter(own.values_list("step", flat=True)))
        counts = +counts
    return counts


def _carried(workflow: Workflow, context: dict[str, Any]) -> list[list[Any]]:
    """``[step, output]`` of each visit a restart carried over, in the order they were made:
    ``carried_visits`` (a list), else the older ``carried`` (an object: its keys have no
    order in the database, so they follow the workflow's edges, then its declared order)."""
    if context.get("carried_visits"):
        return context["carried_visits"]
    return _in_order(workflow, context.get("carried") or {})


def _in_order(workflow: Workflow, outputs: dict[str, Any]) -> list[list[Any]]:
    """``[step, output]`` of ``outputs``, along the workflow's edges, then in declared order."""
    along = [step.name for step in workflow.path(outputs) if step.name in outputs]
    rest = [step.name for step in workflow.steps if step.name in outputs and step.name not in along]
    return [[name, outputs[name]] for name in [*along, *rest]]


def visit_of(visits: list[Visit], step: str, at: datetime) -> Visit | None:
    """The done visit of ``step`` that something written at ``at`` during it belongs to:
    the first whose run finished at or after ``at``; None when none did (it belongs to the
    visit still ahead, or to a visit carried over)."""
    return next(
        (v for v in visits if v.name == step and v.run is not None and v.run.finished_at >= at),
        None,
    )


def producer_of(version: ArtifactVersion, done_visits: list[Visit]) -> Visit | None:
    """The visit (of ``done_visits``, every one the execution made) that produced artifact
    ``version``: the visit of its step in the round it records (the step's last carried
    visit when a migration carried them all); for a copy a restart made, the step's last
    carried visit; for a version stored before the round was kept, the
    first visit of its step whose run finished after it."""
    step = version.produced_by_step
    if version.produced_in_round == 0:
        return next((v for v in reversed(done_visits) if v.name == step and v.carried), None)
    if version.produced_in_round is not None:
        made = version.produced_in_round
        found = next((v for v in done_visits if v.name == step and v.run is not None and v.run.round == made), None)
        if found is None and not any(v.name == step and v.run is not None for v in done_visits):
            # Its visits were carried over by a migration to another version (its runs stay as the record).
            found = next((v for v in reversed(done_visits) if v.name == step and v.carried), None)
        return found
    made_in = visit_of(done_visits, step, version.created_at)
    if made_in is None:  # none of its runs finished after it: a step a restart carried over made it
        made_in = next((v for v in reversed(done_visits) if v.name == step and v.carried), None)
    return made_in


def produced_before(ref: dict[str, Any], before: list[Visit], done_visits: list[Visit]) -> ArtifactVersion | None:
    """The newest version of the artifact ``ref`` points at (an artifact reference of the
    context) that one of the visits ``before`` produced, or None. ``done_visits``: every
    visit the execution made (to tell which produced each version)."""
    latest = ArtifactVersion.objects.filter(pk=ref.get("version_pk")).first()
    if latest is None:
        return None
    kept = {(v.name, v.visit) for v in before}
    versions = ArtifactVersion.objects.filter(artifact_id=latest.artifact_id).select_related("artifact")
    for version in versions.order_by("-number"):
        producer = producer_of(version, done_visits)
        if producer is not None and (producer.name, producer.visit) in kept:
            return version
    return None
