"""A workflow whose one step hangs past its timeout (step_overdue), for the triage tests."""

import time

from executions import registry
from executions.workflow import Workflow, WorkflowInput, parse_with


class SlowInput(WorkflowInput):
    seconds: int = 8


flow = registry.register(
    Workflow(
        name="slow_step",
        version=1,
        title="A step that hangs",
        parse_input=parse_with(SlowInput),
        goal=lambda data: "hang longer than the step may",
    )
)


@flow.step("hang", label="Hanging past its timeout", timeout=1)
def hang(ctx):
    time.sleep(ctx.input["seconds"])
    return {"slept": ctx.input["seconds"]}
