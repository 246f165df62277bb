"""The shop's support data the sandbox serves: tickets, past orders, stock.

Read-only and in memory (never in the SQLite file, so ``POST /_reset`` leaves it
alone). Every accessor answers a fresh copy, or ``None`` for an unknown id.

The past orders are a copy of ``workflows/orders.py``'s catalogue (customer,
shipping address, items; without the ``damage`` report, which reaches the shop
as a ticket here). The sandbox is a standard-library-only process that imports
none of the Django apps, so it keeps its own copy; ``tests/integration/test_sandbox_providers.py``
checks that the two agree.

Stock levels are fixed: submitting a replacement order does not lower them.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

CATALOGUE_ID = "past_orders_v1"


def _item(sku: str, name: str, qty: int, unit_price: str) -> dict[str, Any]:
    return {"sku": sku, "name": name, "qty": qty, "unit_price": unit_price}


_ORDERS: dict[str, dict[str, Any]] = {
    "ORD-1001": {
        "placed_on": "2026-08-03",
        "currency": "EUR",
        "customer": {"id": "CUST-0042", "name": "Ana Pereira", "email": "ana.pereira@example.com"},
        "shipping_address": {"line1": "Rua das Flores 12", "city": "Porto", "postcode": "4050-262", "country": "PT"},
        "items": [
            _item("SKU-MUG-01", "Stoneware mug, blue", 4, "12.50"),
            _item("SKU-PLT-02", "Dinner plate, 27 cm", 6, "18.90"),
            _item("SKU-NAP-03", "Linen napkins (set of 4)", 1, "24.00"),
        ],
    },
    "ORD-1002": {
        "placed_on": "2026-08-11",
        "currency": "EUR",
        "customer": {"id": "CUST-0107", "name": "Jonas Weber", "email": "jonas.weber@example.com"},
        "shipping_address": {"line1": "Lindenstraße 8", "city": "Leipzig", "postcode": "04109", "country": "DE"},
        "items": [
            _item("SKU-LMP-10", "Desk lamp, brass", 1, "89.00"),
            _item("SKU-BLB-11", "LED bulb E27 (2 pack)", 2, "9.90"),
        ],
    },
    "ORD-1003": {
        "placed_on": "2026-08-19",
        "currency": "EUR",
        "customer": {"id": "CUST-0213", "name": "Claire Martin", "email": "claire.martin@example.com"},
        "shipping_address": {"line1": "12 rue Mercière", "city": "Lyon", "postcode": "69002", "country": "FR"},
        "items": [
            _item("SKU-GLS-20", "Wine glass (set of 6)", 2, "34.00"),
            _item("SKU-DEC-21", "Glass decanter", 1, "42.50"),
        ],
    },
    "ORD-1004": {
        "placed_on": "2026-09-02",
        "currency": "EUR",
        "customer": {"id": "CUST-0318", "name": "Marco Rossi", "email": "marco.rossi@example.com"},
        "shipping_address": {"line1": "Via Garibaldi 45", "city": "Torino", "postcode": "10122", "country": "IT"},
        "items": [
            _item("SKU-TWL-30", "Bath towel, sand", 4, "19.00"),
            _item("SKU-MAT-31", "Bath mat", 1, "27.00"),
        ],
    },
    "ORD-1005": {
        "placed_on": "2026-09-15",
        "currency": "EUR",
        "customer": {"id": "CUST-0420", "name": "Sofia Lindqvist", "email": "sofia.lindqvist@example.com"},
        "shipping_address": {"line1": "Drottninggatan 71", "city": "Stockholm", "postcode": "111 36", "country": "SE"},
        "items": [
            _item("SKU-POT-40", "Cast-iron pot, 4 l", 1, "119.00"),
            _item("SKU-LID-41", "Glass lid, 24 cm", 1, "15.00"),
            _item("SKU-MIT-42", "Oven mitts (pair)", 2, "11.50"),
        ],
    },
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
