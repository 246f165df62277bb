"""A workflow whose one step hangs past its timeout (step_overdue), for the triage tests."""

import time

from executions.authoring import registry
from executions.authoring.retry import RetryPolicy
from executions.authoring.workflow import Workflow, WorkflowInput


class SlowInput(WorkflowInput):
    seconds: int = 8


flow = registry.register(
    Workflow(
        name="slow_step",
        version=1,
        title="A step that hangs",
        input=SlowInput,
        goal=lambda data: "hang longer than the step may",
    )
)


@flow.step("hang", label="Hanging past its timeout", timeout=1)
def hang(ctx):
    time.sleep(ctx.input["seconds"])
    return {"slept": ctx.input["seconds"]}


hung = registry.register(
    Workflow(
        name="hung_step",
        version=1,
        title="A step that never returns in time",
        input=SlowInput,
        goal=lambda data: "hang far past the step's timeout",
    )
)


@hung.step("hang", label="Hanging for good", timeout=1, retry=RetryPolicy(max_attempts=1))
def hang_for_good(ctx):
    time.sleep(ctx.input["seconds"])
    return {"slept": ctx.input["seconds"]}
