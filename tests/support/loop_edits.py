"""A "code change" to the ``spinner`` loop (tests/support/control_flows.py) for ``keel
replay``'s tests of a loop's later visits: listed after tests.support.control_flows in a
replay process's RUNTIME_WORKFLOW_MODULES, it edits the registered v1 in that process
only, as ``REPLAY_EDIT`` says:

- ``visit2_prompt``: ``think`` asks differently on its second visit only (the first and
  third are as recorded);
- ``visit3_choice``: ``more`` ends the loop on its third visit (where it went round);
- anything else: no change.
"""

import dataclasses
import os

from tests.support import control_flows

EDIT = os.environ.get("REPLAY_EDIT", "")
flow = control_flows.spinner


def _replace(name: str, **changes) -> None:
    index = [s.name for s in flow.steps].index(name)
    flow.steps[index] = dataclasses.replace(flow.steps[index], **changes)


def think(ctx, model) -> dict:
    instruction = "Think once more, and deeper." if ctx.visit == 2 else "Think once more."
    response = model.complete(prompt=ctx.prompt(instruction), prompt_version="spin-v1", prompt_id="spin")
    return {"visit": ctx.visit, "thought": response.text}


def more(ctx) -> str:
    return "stop" if ctx.visit == 3 else "think"


if EDIT == "visit2_prompt":
    _replace("think", fn=think)
elif EDIT == "visit3_choice":
    _replace("more", fn=more)
