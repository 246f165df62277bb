"""``kit_parcel`` v1, an author's workflow in their own package, written with keel's
authoring surface alone: write a label (an artifact), a manager approves that exact
version, the parcel is shipped (an effect at the sandbox's ``/notify``, keyed by the
label's version), then wait for the signal ``parcel_delivered`` and close with what it
carried."""

import os

from pydantic import Field

from approvals.gate import Approval
from executions.authoring import Effect, SignalPayload, Workflow, WorkflowInput, register, request_json


class ParcelInput(WorkflowInput):
    item: str = Field(min_length=1, max_length=50)


flow = register(Workflow(name="kit_parcel", version=1, title="Send a parcel", input=ParcelInput))


@flow.step("label", label="Writing the label")
def label(ctx):
    asked = "".join(f"- {c}\n" for c in ctx.notes["constraints"])  # an approver's requested change lands here
    text = f"Parcel: {ctx.input['item']}\nDraft {ctx.next_version('label')}\n{asked}"
    ctx.save_artifact("label", kind="label", title="The label", content=text, content_type="text/plain")
    return {"draft": ctx.next_version("label")}


flow.gate("approve", label="Awaiting approval of the label", spec=Approval(artifact="label", action="ship_parcel"))


@flow.effect("ship", label="Shipping the parcel", action="ship_parcel", guarded_by="approve")
def ship(ctx):
    version = ctx.artifact("label")["version"]
    return Effect(
        key=f"{ctx.ref}:ship:v{version}",
        args={"channel": "email", "to": ["depot@example.com"], "subject": f"Ship {ctx.input['item']}", "body": "-"},
        call=lambda args, key: request_json("POST", os.environ["SANDBOX_URL"] + "/notify", body=args, key=key),
    )


class Delivered(SignalPayload):
    at: str


flow.wait("delivered", label="Waiting for the delivery", signal="parcel_delivered", timeout=3600, payload=Delivered)


@flow.step("close", label="Recording the delivery")
def close(ctx):
    return {"delivered_at": ctx.state["delivered"]["payload"]["at"]}
