"""Pure helpers for the replacement-order workflow: past orders and the proposal.

The "replacement order" example answers a support agent's request ("the customer of
ORD-1001 received damaged items; send replacements once a manager approves") from
a small, deterministic catalogue of past orders (``data/past_orders_v1.json``, the
same file the sandbox's shop serves). Everything is pure: no
database, no network, no clock. The same inputs always give the same outputs
(byte-for-byte for :func:`render_proposal`), so a step can be replayed safely.

Money is kept as strings with two decimals (``"24.90"``) in the order's currency,
so JSON round-trips never change a value.
"""

from __future__ import annotations

import json
import re
from copy import deepcopy
from decimal import Decimal
from pathlib import Path
from typing import Any

from artifacts.presenters import Field, Section, Summary, Table

__all__ = [
    "CATALOGUE_ID",
    "UnknownOrder",
    "get_order",
    "known_orders",
    "order_facts",
    "proposal_summary",
    "render_proposal",
    "replacement_proposal",
]

ORDER_ID_RE = re.compile(r"^ORD-\d+$")

# The past orders a replacement can be asked for, from the one catalogue the sandbox's
# shop serves too (data/past_orders_v1.json). ``damage`` is the customer's report:
# which items (sku, qty) arrived damaged or must be returned, and why.
_CATALOGUE = json.loads((Path(__file__).parent / "data" / "past_orders_v1.json").read_text())
CATALOGUE_ID: str = _CATALOGUE["catalogue_id"]
_PAST_ORDERS: dict[str, dict[str, Any]] = _CATALOGUE["orders"]


class UnknownOrder(ValueError):
    """The order id is malformed or not in the catalogue; the message names the known orders."""

    def __init__(self, order_id: object) -> None:
        self.order_id = order_id
        known = ", ".join(known_orders())
        if not isinstance(order_id, str) or not ORDER_ID_RE.match(order_id):
            message = (
                f"{order_id!r} is not an order id: expected ORD- and digits, e.g. ORD-1001 (known orders: {known})"
            )
        else:
            message = f"{order_id} is not a known past order ({CATALOGUE_ID} has {known})"
        super().__init__(message)


def known_orders() -> list[str]:
    return sorted(_PAST_ORDERS)


def get_order(order_id: object) -> dict[str, Any]:
    """The past order ``order_id`` (a fresh copy, with its ``order_id``); raises UnknownOrder."""
    if not isinstance(order_id, str) or order_id not in _PAST_ORDERS:
        raise UnknownOrder(order_id)
    return {"order_id": order_id, "catalogue_id": CATALOGUE_ID, **deepcopy(_PAST_ORDERS[order_id])}


def _money(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.01'))}"


def replacement_proposal(order: dict[str, Any], *, reference: str, version: int) -> dict[str, Any]:
    """A replacement order for exactly the damaged items of ``order`` (a :func:`get_order` result).

    Only items named in the damage report, at most the quantity ordered, shipped to the
    original address, free of charge. Raises ValueError if the damage report names an
    item or a quantity the order doesn't have (never replace more than was bought).
    """
    ordered = {item["sku"]: item for item in order["items"]}
    items = []
    for damaged in order["damage"]["items"]:
        original = ordered.get(damaged["sku"])
        if original is None:
            raise ValueError(f"{order['order_id']}: damaged item {damaged['sku']} is not in the order")
        if not 0 < damaged["qty"] <= original["qty"]:
            raise ValueError(
                f"{order['order_id']}: {damaged['qty']} × {damaged['sku']} damaged but {original['qty']} ordered"
            )
        items.append({**original, "qty": damaged["qty"]})
    value = sum((Decimal(i["unit_price"]) * i["qty"] for i in items), Decimal(0))
    return {
        "reference": reference,
        "proposal_version": version,
        "original_order": order["order_id"],
        "customer": order["customer"],
        "shipping_address": order["shipping_address"],
        "reason": order["damage"]["reason"],
        "items": items,
        "currency": order["currency"],
        "replacement_value": _money(value),
        "charge_to_customer": "0.00",
    }


def render_proposal(proposal: dict[str, Any]) -> str:
    """The proposal as the artifact's bytes: pretty, key-sorted JSON, newline-terminated."""
    return json.dumps(proposal, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def proposal_summary(proposal: dict[str, Any]) -> Summary:
    """A proposal (the parsed artifact) as an approver reads it: what, for whom, where, how much.

    Raises KeyError/TypeError/ValueError on another shape (the caller falls back to a
    field-by-field summary).
    """
    currency = proposal["currency"]
    customer = proposal["customer"]
    address = proposal["shipping_address"]
    rows = []
    for item in proposal["items"]:
        line_total = _money(Decimal(item["unit_price"]) * int(item["qty"]))
        rows.append(
            [
                item["sku"],
                item["name"],
                str(item["qty"]),
                f"{item['unit_price']} {currency}",
                f"{line_total} {currency}",
            ]
        )
    place = " ".join(p for p in (address.get("postcode", ""), address.get("city", "")) if p)
    lines = [address.get("line1", ""), address.get("line2", ""), place, address.get("country", "")]
    return Summary(
        title=f"Replacement order for {proposal['original_order']}",
        sections=[
            Section(
                title="Replacement",
                fields=[
                    Field("Original order", proposal["original_order"]),
                    Field("Reason", proposal["reason"]),
                    Field("Replacement value", f"{proposal['replacement_value']} {currency}"),
                    Field("Charged to the customer", f"{proposal['charge_to_customer']} {currency}"),
                    Field("Client reference", proposal["reference"]),
                ],
            ),
            Section(
                title="Customer",
                fields=[
                    Field("Name", customer["name"]),
                    Field("Customer id", customer["id"]),
                    Field("Email", customer["email"]),
                ],
            ),
            Section(title="Shipping address", fields=[Field("Ship to", "\n".join(line for line in lines if line))]),
            Section(
                title="Items",
                table=Table(
                    columns=["SKU", "Item", "Quantity", "Unit price", "Line total"],
                    rows=rows,
                    numeric=frozenset({2, 3, 4}),
                ),
            ),
        ],
    )


def order_facts(order: dict[str, Any]) -> list[dict[str, Any]]:
    """Verified facts about the original order and its damage report, for the progress notes."""
    source = f"{CATALOGUE_ID}:{order['order_id']}"
    damaged = ", ".join(f"{d['qty']} × {d['sku']}" for d in order["damage"]["items"])
    return [
        {
            "id": "O1",
            "statement": (
                f"Order {order['order_id']} was placed on {order['placed_on']} by {order['customer']['name']} "
                f"({order['customer']['id']}) with {len(order['items'])} item lines."
            ),
            "value": order["order_id"],
            "source": source,
        },
        {
            "id": "O2",
            "statement": (
                f"On {order['damage']['reported_on']} the customer reported damaged items: {damaged} "
                f"({order['damage']['reason']})."
            ),
            "value": damaged,
            "source": f"{source}:damage",
        },
    ]
