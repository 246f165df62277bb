"""Newer versions of monthly_report for S58 (versions in flight), deployed beside v1:

- v2 inserts ``archive_copy`` after the approval (between ``review`` and ``publish``), and
  says how a v1 execution becomes a v2 one (``migrate_from``): the figures' output gains
  ``currency``, which ``archive_copy`` reads — so an execution moved without it would fail
  there;
- v3 asks the approval for another action (``publish_report_v3``): an approval asked on v1
  goes stale when an execution moves to it.
"""

from dataclasses import replace

from approvals.gate import Approval
from executions.authoring import registry
from executions.authoring.workflow import StepKind, Workflow
from workflows.monthly_report import flow as v1


def _copy(version: int, **extra) -> Workflow:
    return Workflow(
        name=v1.name,
        version=version,
        title=v1.title,
        input=v1.input,
        goal=v1.goal,
        constraints=v1.constraints,
        compensations=dict(v1.compensations),
        **extra,
    )


def _currency(state: dict) -> dict:
    figures = state["outputs"].get("retrieve_figures")
    if figures is not None:
        state["outputs"]["retrieve_figures"] = {**figures, "currency": "EUR"}
    return state


v2 = _copy(2, migrate_from={1: _currency})
v2.steps.extend(s for s in v1.steps if s.name in ("retrieve_figures", "analyze", "draft_report", "review"))


@v2.step("archive_copy", label="Archiving a copy (v2 only)")
def archive_copy(ctx):
    return {"archived": ctx.artifact("report")["version"], "currency": ctx.state["retrieve_figures"]["currency"]}


v2.steps.extend(s for s in v1.steps if s.name in ("publish", "notify"))

v3 = _copy(3)
for step in v1.steps:
    if step.name == "review":
        step = replace(step, spec=replace(step.spec, action="publish_report_v3"))
        assert isinstance(step.spec, Approval)
    elif step.name == "publish":
        assert step.kind == StepKind.EFFECT
        step = replace(step, action="publish_report_v3")
    v3.steps.append(step)

registry.register(v2)
registry.register(v3)
