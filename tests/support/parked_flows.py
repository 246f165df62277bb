"""Workflows only the "any workflow" tests register (tests/scenarios/test_any_workflow.py):
``waiter`` waits for the signal ``go`` (an hour at most), then says it went (S50);
``sloppy_payout`` (below) keys its approved effect by attempt."""

from __future__ import annotations

from approvals.gate import Approval
from executions.authoring import Effect, FailureKind, StepFailure, Workflow, WorkflowInput, register
from workflows import services_client


class WaiterInput(WorkflowInput):
    name: str = "w"


waiter = register(Workflow(name="waiter", version=1, title="Waits for a signal", input=WaiterInput))
waiter.wait("hold", label="Waiting for go", signal="go", timeout=3600)


@waiter.step("went", label="Going")
def went(ctx) -> dict:
    return {"went": ctx.input["name"]}


# ``sloppy_payout``: an approved payout whose author put the attempt in the effect's key, at
# an order service that doesn't de-duplicate; its first call acts, then answers 500. Under one
# approval the retry's new key must not pay again (one decision, one effect).
sloppy = register(Workflow(name="sloppy_payout", version=1, title="A payout keyed by attempt", input=WaiterInput))


@sloppy.step("draft", label="Drafting the payout")
def draft(ctx) -> dict:
    ctx.save_artifact(
        "payout", kind="payout", title="Payout", content=f"pay {ctx.input['name']} 5", content_type="text/plain"
    )
    return {}


sloppy.gate("review", label="Approving the payout", spec=Approval(artifact="payout", action="payout"))


def _acts_then_fails(args: dict, key: str) -> dict:
    services_client.submit_order({"reference": key, **args}, key)
    raise StepFailure(FailureKind.TRANSIENT, "the order service answered 500 after it acted")


@sloppy.effect("payout", label="Paying out", action="payout", guarded_by="review")
def payout(ctx) -> Effect:
    key = f"{ctx.ref}:payout:a{ctx.execution.failed_attempts + 1}"  # the author's mistake: the attempt in the key
    args = {"original_order": ctx.input["name"], "sku": "PAYOUT", "quantity": 5}
    return Effect(key=key, args=args, call=_acts_then_fails, lookup=services_client.find_order, honors_key=False)
