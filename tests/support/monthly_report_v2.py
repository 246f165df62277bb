"""A "new deployment" of monthly_report for S19: version 2 adds a step before publishing."""

from executions.authoring import registry
from executions.authoring.workflow import Workflow
from workflows.monthly_report import flow as v1

v2 = Workflow(
    name=v1.name,
    version=2,
    title=v1.title,
    input=v1.input,
    goal=v1.goal,
    constraints=v1.constraints,
    steps=[s for s in v1.steps if s.name in ("retrieve_figures", "analyze", "draft_report")],
)


@v2.step("board_summary", label="Summarising for the board (v2 only)")
def board_summary(ctx):
    return {"added_in": "v2"}


for step in v1.steps:
    if step.name in ("review", "publish", "notify"):
        v2.steps.append(step)

registry.register(v2)
