"""The shop's support data the sandbox serves: tickets, past orders, stock.

Read-only and in memory (never in the SQLite file, so ``POST /_reset`` leaves it
alone). Every accessor answers a fresh copy, or ``None`` for an unknown id.

The past orders are ``workflows/orders.py``'s catalogue, read from the same file
(``workflows/data/past_orders_v1.json``: customer, shipping address, items; without
the ``damage`` report, which reaches the shop as a ticket here). The sandbox is a
standard-library-only process that imports none of the Django apps, so it reads the
data, not the module.

Stock levels are fixed: submitting a replacement order does not lower them.
"""

from __future__ import annotations

import json
from copy import deepcopy
from pathlib import Path
from typing import Any

# The past orders: the one catalogue the example workflow reads too (workflows/orders.py),
# as data (JSON), so this standard-library process imports none of the apps. The damage
# reports stay out: they reach the shop as tickets (below).
_CATALOGUE = json.loads(
    (Path(__file__).resolve().parent.parent / "workflows" / "data" / "past_orders_v1.json").read_text()
)
CATALOGUE_ID: str = _CATALOGUE["catalogue_id"]
_ORDERS: dict[str, dict[str, Any]] = {
    order_id: {field: value for field, value in order.items() if field != "damage"}
    for order_id, order in _CATALOGUE["orders"].items()
}


def _ticket(
    ticket_id: str, order_id: str, sku: str, quantity: int, opened_on: str, subject: str, message: str
) -> dict[str, Any]:
    order = _ORDERS[order_id]
    [item] = [item for item in order["items"] if item["sku"] == sku]
    return {
        "ticket_id": ticket_id,
        "status": "open",
        "opened_on": opened_on,
        "customer": dict(order["customer"]),
        "order_id": order_id,
        "sku": sku,
        "item": item["name"],
        "quantity": quantity,
        "subject": subject,
        "message": message,
    }


# One ticket per broken item. TCK-1002's item is out of stock, TCK-1004's is
# short (2 left for 4 broken) and TCK-1003 claims more sets (3) than were
# ordered (2), so a runtime that clamps to the ordered quantity has work to do.
_TICKETS: dict[str, dict[str, Any]] = {
    ticket["ticket_id"]: ticket
    for ticket in (
        _ticket(
            "TCK-1001",
            "ORD-1001",
            "SKU-MUG-01",
            2,
            "2026-08-07",
            "Two mugs arrived broken",
            "Hello, the parcel was crushed in transit and two of the four blue mugs arrived broken. "
            "Could you send replacements?",
        ),
        _ticket(
            "TCK-1002",
            "ORD-1002",
            "SKU-LMP-10",
            1,
            "2026-08-14",
            "Dented lamp",
            "The brass desk lamp arrived with its shade dented. I would like a new one.",
        ),
        _ticket(
            "TCK-1003",
            "ORD-1003",
            "SKU-GLS-20",
            3,
            "2026-08-21",
            "Glasses shattered",
            "Three sets of wine glasses arrived shattered. Please replace them.",
        ),
        _ticket(
            "TCK-1004",
            "ORD-1004",
            "SKU-TWL-30",
            4,
            "2026-09-06",
            "Torn towels",
            "All four sand bath towels arrived with torn seams.",
        ),
        _ticket(
            "TCK-1005",
            "ORD-1005",
            "SKU-LID-41",
            1,
            "2026-09-18",
            "Cracked glass lid",
            "The glass lid of my pot was cracked in the box.",
        ),
    )
}

# Available units per SKU of the catalogue.
_STOCK: dict[str, int] = {
    "SKU-MUG-01": 25,
    "SKU-PLT-02": 40,
    "SKU-NAP-03": 12,
    "SKU-LMP-10": 0,
    "SKU-BLB-11": 60,
    "SKU-GLS-20": 10,
    "SKU-DEC-21": 3,
    "SKU-TWL-30": 2,
    "SKU-MAT-31": 7,
    "SKU-POT-40": 4,
    "SKU-LID-41": 12,
    "SKU-MIT-42": 30,
}
_SKU_NAMES = {item["sku"]: item["name"] for order in _ORDERS.values() for item in order["items"]}


def ticket_ids() -> list[str]:
    return sorted(_TICKETS)


def order_ids() -> list[str]:
    return sorted(_ORDERS)


def get_ticket(ticket_id: str) -> dict[str, Any] | None:
    """The ticket, or None if unknown."""
    ticket = _TICKETS.get(ticket_id)
    return deepcopy(ticket) if ticket is not None else None


def get_order(order_id: str) -> dict[str, Any] | None:
    """The past order with its ``order_id`` and ``catalogue_id``, or None if unknown."""
    order = _ORDERS.get(order_id)
    if order is None:
        return None
    return {"order_id": order_id, "catalogue_id": CATALOGUE_ID, **deepcopy(order)}


def get_stock(sku: str) -> dict[str, Any] | None:
    """``{"sku", "name", "available"}``, or None for a SKU outside the catalogue."""
    if sku not in _STOCK:
        return None
    return {"sku": sku, "name": _SKU_NAMES[sku], "available": _STOCK[sku]}


# How a support agent with a route step (support_agent v2) handles each ticket: the
# sandbox's model policies choose these, deterministically (sandbox.agent_policy).
ROUTES: dict[str, tuple[str, str]] = {
    "TCK-1002": ("refund", "the item is out of stock, so a refund instead of a replacement"),
    "TCK-1005": ("answer", "the customer asks for nothing yet; acknowledge it"),
}
DEFAULT_ROUTE = ("resolve", "the broken items can be replaced")


def route_of(ticket_id: str) -> str:
    return ROUTES.get(ticket_id, DEFAULT_ROUTE)[0]


def route_reason(ticket_id: str) -> str:
    return ROUTES.get(ticket_id, DEFAULT_ROUTE)[1]
