"""A workflow with an author's mistake the runtime can only meet at run time (registered
on import): ``mistaken_gate``'s approval names an artifact no step saves."""

from __future__ import annotations

from approvals.gate import Approval
from executions.authoring import Workflow, register

mistaken_gate = register(Workflow(name="mistaken_gate", version=1, title="Asks to approve what was never saved"))


@mistaken_gate.step("draft", label="Drafting")
def _draft(ctx) -> dict:
    ctx.save_artifact("claim", kind="claim", title="A claim", content="42 EUR", content_type="text/plain")
    return {}


mistaken_gate.gate("approve", label="Awaiting approval", spec=Approval(artifact="nonexistent", action="pay"))
