"""A "code change" to monthly_report v1 for ``keel replay``'s tests: listed after
workflows.monthly_report in a replay process's RUNTIME_WORKFLOW_MODULES, it edits the
registered v1 in that process only, as ``REPLAY_EDIT`` says:

- ``prompt``: the analysis prompt's instruction changed (a model call's request differs);
- ``effect``: the publish key changed (an effect's key differs from the ledger's);
- ``approval``: the review gate asks for another action (the approval's binding differs);
- ``insert``: a step ``check_tone`` inserted before ``draft_report`` (structure);
- ``remove``: ``analyze`` removed (structure);
- anything else: no change.
"""

import dataclasses
import os

from approvals.gate import Approval
from executions.authoring import Effect
from executions.authoring.workflow import Step, StepKind
from workflows import monthly_report

EDIT = os.environ.get("REPLAY_EDIT", "")
flow = monthly_report.flow


def _replace(name: str, **changes) -> None:
    index = [s.name for s in flow.steps].index(name)
    flow.steps[index] = dataclasses.replace(flow.steps[index], **changes)


def analyze(ctx, model):
    prompt = ctx.prompt("Write a LONG summary of the month for the board. Cite only the verified facts.")
    response = model.complete(prompt=prompt, prompt_version="monthly-analysis-v1", prompt_id="monthly-analysis")
    return {"narrative": response.text}


def publish(ctx):
    effect = monthly_report.publish(ctx)
    return Effect(key=effect.key + ":again", args=effect.args, call=effect.call, lookup=effect.lookup)


if EDIT == "prompt":
    _replace("analyze", fn=analyze)
elif EDIT == "effect":
    _replace("publish", fn=publish)
elif EDIT == "approval":
    _replace("review", spec=Approval(artifact="report", action="publish_everywhere"))
elif EDIT == "insert":
    at = [s.name for s in flow.steps].index("draft_report")
    flow.steps.insert(at, Step(name="check_tone", label="Checking the tone", kind=StepKind.COMPUTE, fn=lambda ctx: {}))
elif EDIT == "remove":
    flow.steps[:] = [s for s in flow.steps if s.name != "analyze"]
