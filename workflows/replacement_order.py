"""The second example workflow: replace the damaged items of a past order.

load the original order → propose a replacement (artifact, JSON) → a manager approves
that exact version → submit it to the order service through the ledger (key and
client reference ``<run>:submit_order:v<version>``) → record the order id as a
verified fact → tell the customer → completed.

The order service may not honour idempotency keys (the sandbox's "reference" mode).
The runtime can't tell, so ``settings.ORDER_SERVICE_HONORS_KEYS`` says so; either
way an order whose outcome is unknown is first looked up by its reference, and with
a service that doesn't deduplicate it is never re-sent blindly (scenario S16).
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from pydantic import Field, field_validator

from approvals.gate import Approval, ApproverPolicy
from artifacts import presenters
from executions.authoring import (
    Effect,
    FailureKind,
    InvalidInput,
    ReceiptField,
    StepFailure,
    Template,
    Workflow,
    WorkflowInput,
    register,
)

from . import orders, services_client

PROPOSAL_KIND = "order"  # Artifact.kind of the proposal; its presenter shows it to the approver

presenters.register(PROPOSAL_KIND, orders.proposal_summary)


class ReplacementInput(WorkflowInput):
    original_order: str = Field(
        examples=["ORD-1001"], description="a past order of the catalogue (ORD-1001 … ORD-1005)"
    )

    @field_validator("original_order", mode="before")
    @classmethod
    def _known(cls, value: Any) -> str:
        try:
            orders.get_order(value)  # the catalogue decides which orders exist
        except orders.UnknownOrder as exc:
            raise InvalidInput("input.original_order", str(exc)) from None
        return value


flow = register(
    Workflow(
        name="replacement_order",
        version=1,
        title="Replacement order",
        input=ReplacementInput,
        deadline_seconds=14 * 24 * 3600,  # a replacement that takes longer needs a person anyway
        goal=lambda data: (
            f"Send the customer of {data['original_order']} a replacement for the items that arrived damaged, "
            "through the order service, after a manager approves the proposal, and confirm it to the customer."
        ),
        constraints=lambda data: [
            f"Replace only the damaged items of {data['original_order']}, never more than were ordered.",
            "Submit only the exact proposal version a manager approved.",
            "Never submit the same replacement twice: look the order up by its reference before any resubmission.",
        ],
    )
)


def _submit_key(ctx) -> str:
    return f"{ctx.ref}:submit_order:v{ctx.artifact('proposal')['version']}"


@flow.step("load_order", label="Loading the original order")
def load_order(ctx) -> dict[str, Any]:
    order = orders.get_order(ctx.input["original_order"])
    ctx.add_facts(orders.order_facts(order))
    return order


@flow.step("propose_replacement", label="Proposing the replacement order")
def propose_replacement(ctx) -> dict[str, Any]:
    order = ctx.state["load_order"]
    version = ctx.next_version("proposal")
    reference = f"{ctx.ref}:submit_order:v{version}"  # the key the approved version will be submitted under
    try:
        proposal = orders.replacement_proposal(order, reference=reference, version=version)
    except ValueError as exc:
        raise StepFailure(FailureKind.INVALID_INPUT, str(exc)) from None
    ctx.save_artifact(
        "proposal",
        kind=PROPOSAL_KIND,
        title=f"Replacement for {order['order_id']} — {order['customer']['name']}",
        content=orders.render_proposal(proposal),
        content_type="application/json",
    )
    return {
        "proposal_version": version,
        "reference": reference,
        "items": [{"sku": i["sku"], "name": i["name"], "qty": i["qty"]} for i in proposal["items"]],
        "replacement_value": proposal["replacement_value"],
    }


flow.gate(
    "review",
    label="Awaiting approval of the proposal",
    spec=Approval(
        artifact="proposal",
        action="submit_order",
        approver=ApproverPolicy(
            permission="approvals.approve_submit_order",
            expires_after_seconds=settings.APPROVAL_TTL_SECONDS,
            on_expiry="cancel",  # a stale replacement proposal is dropped, not kept waiting
        ),
    ),
)


# What ``record_order`` reads from the order service's receipt. An operator who resolves
# an unknown submission as succeeded gives it (found at the order service by reference).
ORDER_ID = ReceiptField(
    name="order_id", label="the order id at the order service", pattern=r"ORD-\d{1,12}", example="ORD-9001"
)


@flow.effect(
    "submit_order",
    label="Submitting the approved replacement order",
    action="submit_order",
    guarded_by="review",
    receipt=(ORDER_ID,),
    # The approved proposal carries this execution's reference, which the step checks: a
    # restart that submits again must propose (and have approved) a proposal of its own.
    restart_with=("propose_replacement",),
)
def submit_order(ctx) -> Effect:
    key = _submit_key(ctx)
    # The arguments come from the approved bytes (the runner re-checked their version
    # and hash right before this step), so what is submitted is what was approved.
    proposal = json.loads(ctx.artifact_content("proposal"))
    if proposal["reference"] != key:
        raise StepFailure(
            FailureKind.PERMISSION, f"the approved proposal carries reference {proposal['reference']}, not {key}"
        )
    return Effect(
        key=key,
        args={
            "reference": key,
            "original_order": proposal["original_order"],
            "customer": proposal["customer"],
            "shipping_address": proposal["shipping_address"],
            "items": proposal["items"],
            "reason": proposal["reason"],
            "currency": proposal["currency"],
            "charge_to_customer": proposal["charge_to_customer"],
        },
        call=services_client.submit_order,
        lookup=services_client.find_order,
        honors_key=settings.ORDER_SERVICE_HONORS_KEYS,
    )


@flow.step("record_order", label="Recording the replacement order")
def record_order(ctx) -> dict[str, Any]:
    receipt = ctx.state["submit_order"]
    key = _submit_key(ctx)
    order_id = receipt.get("order_id")
    if not order_id:
        raise StepFailure(
            FailureKind.BUSINESS_REJECTION, f"the order service's receipt for {key} has no order_id", evidence=receipt
        )
    ctx.add_facts(
        [
            {
                "id": "O3",
                "statement": (
                    f"Replacement order {order_id} for {ctx.input['original_order']} was accepted by the order "
                    f"service under reference {key}."
                ),
                "value": order_id,
                "source": f"order_service:{key}",
            }
        ]
    )
    return {"order_id": order_id, "reference": key}


# What the customer is told (executions.authoring.outbound): values from the catalogue and the receipt.
CONFIRMED = Template(
    name="replacement confirmed",
    text="Dear {customer}, we are sorry some items of order {order} arrived damaged. Replacement order "
    "{replacement} ({items}) ships to your address at no charge.",
)


@flow.effect(
    "confirm",
    label="Confirming the replacement to the customer",
    action="notify_customer",
    third_party=True,
    templates=(CONFIRMED,),
)
def confirm(ctx) -> Effect:
    proposal = ctx.artifact("proposal")
    order = ctx.state["load_order"]
    order_id = ctx.state["record_order"]["order_id"]
    lines = [f"{i['qty']} × {i['name']}" for i in ctx.state["propose_replacement"]["items"]]
    return Effect(
        key=f"{ctx.ref}:confirm:v{proposal['version']}",
        args={
            "channel": "email",
            "to": [order["customer"]["email"]],
            "subject": f"Your replacement order {order_id} for {order['order_id']}",
            "body": CONFIRMED.fill(
                customer=order["customer"]["name"],
                order=order["order_id"],
                replacement=order_id,
                items=", ".join(lines),
            ),
        },
        call=services_client.notify,
        lookup=services_client.find_notification,
    )


@flow.compensation("submit_order")
def cancel_replacement_order(args: dict[str, Any], receipt: dict[str, Any]) -> dict[str, Any]:
    """If the execution is cancelled after the order went out: cancel that order (recorded, not run)."""
    return {
        "operation": "cancel_order",
        "order_id": receipt.get("order_id"),
        "reference": args.get("reference"),
        "original_order": args.get("original_order"),
    }
