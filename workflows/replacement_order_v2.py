"""Version 2 of the replacement order: the customer hears only once the shipment is confirmed.

load the original order → propose the replacement → a manager approves that exact
version → submit it through the ledger → record the order id → **wait for the signal
``shipment_confirmed``** (at most ``confirm_within_seconds``, default 7 days; past it
the execution needs attention, ``waiting_overdue``) → tell the customer, with the
tracking reference the signal carried → completed.

New executions pin version 2; those started on version 1 finish on version 1 (both
stay registered). Every step but the wait and the confirmation is version 1's.
"""

from __future__ import annotations

from pydantic import Field

from executions.authoring import DB_INT_MAX, Effect, SignalPayload, Template, Workflow, register

from . import replacement_order as v1
from . import services_client

CONFIRM_WITHIN_DEFAULT = 7 * 24 * 3600
SIGNAL = "shipment_confirmed"


class ReplacementInputV2(v1.ReplacementInput):
    confirm_within_seconds: int = Field(
        default=CONFIRM_WITHIN_DEFAULT,
        ge=1,
        le=DB_INT_MAX,
        description="how long to wait for the shipment confirmation, in seconds (default 7 days)",
    )


class ShipmentConfirmed(SignalPayload):
    """The payload of ``shipment_confirmed``: whoever signals may only say the tracking
    reference, in the carrier's shape (it goes into the customer's e-mail)."""

    tracking: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{2,39}$",
        description="the carrier's tracking reference, e.g. TRK-123456 (letters, digits, - and _)",
    )


# What the customer is told once the shipment is confirmed (executions.authoring.outbound).
SHIPPED = Template(
    name="replacement shipped",
    text="Dear {customer}, we are sorry some items of order {order} arrived damaged. Replacement order "
    "{replacement} ({items}) ships to your address at no charge. It has shipped{tracking}.",
)


flow = register(
    Workflow(
        name=v1.flow.name,
        version=2,
        title=v1.flow.title,
        input=ReplacementInputV2,
        deadline_seconds=v1.flow.deadline_seconds,
        goal=v1.flow.goal,
        constraints=lambda data: [
            *v1.flow.constraints(data),
            "Tell the customer only after the shipment is confirmed, with its tracking reference.",
        ],
        steps=[s for s in v1.flow.steps if s.name != "confirm"],
        compensations=dict(v1.flow.compensations),
    )
)

flow.wait(
    "shipment",
    label="Waiting for the shipment confirmation",
    signal=SIGNAL,
    timeout=lambda data: data["confirm_within_seconds"],
    payload=ShipmentConfirmed,
)


@flow.effect(
    "confirm",
    label="Confirming the replacement to the customer",
    action="notify_customer",
    third_party=True,
    templates=(SHIPPED,),
)
def confirm(ctx) -> Effect:
    proposal = ctx.artifact("proposal")
    order = ctx.state["load_order"]
    order_id = ctx.state["record_order"]["order_id"]
    shipment = ctx.state["shipment"].get("payload")
    tracking = shipment.get("tracking") if isinstance(shipment, dict) else None
    lines = [f"{i['qty']} × {i['name']}" for i in ctx.state["propose_replacement"]["items"]]
    body = SHIPPED.fill(
        customer=order["customer"]["name"],
        order=order["order_id"],
        replacement=order_id,
        items=", ".join(lines),
        tracking=f" (tracking {tracking})" if tracking else "",
    )
    return Effect(
        key=f"{ctx.ref}:confirm:v{proposal['version']}",
        args={
            "channel": "email",
            "to": [order["customer"]["email"]],
            "subject": f"Your replacement order {order_id} for {order['order_id']}",
            "body": body,
        },
        call=services_client.notify,
        lookup=services_client.find_notification,
    )
