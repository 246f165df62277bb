"""A workflow whose one step raises with a configured secret in its message (the metrics
token the test sets), for the error-reporting test: the error must reach Sentry tagged with
the execution, the workflow and the step, and without the secret."""

import os

from executions.authoring import registry
from executions.authoring.workflow import Workflow, WorkflowInput


class Nothing(WorkflowInput):
    pass


flow = registry.register(
    Workflow(name="failing_step", version=1, title="A step that raises", input=Nothing, goal=lambda data: "raise")
)


@flow.step("connect", label="Connecting with a secret")
def connect(ctx):
    token = os.environ["RUNTIME_METRICS_TOKEN"]
    raise ConnectionError(f"the upstream refused Authorization: Token {token}")
