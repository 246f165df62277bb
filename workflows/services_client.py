"""Effect calls and lookups for the report, order and mail services (the sandbox in demos)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from django.conf import settings

from executions.authoring import request_json


def _url(path: str) -> str:
    return settings.SANDBOX_URL.rstrip("/") + path


def publish_report(args: dict[str, Any], key: str) -> dict[str, Any]:
    return request_json("POST", _url("/reports/publish"), body=args, key=key)


def find_publication(key: str, args: dict[str, Any]) -> dict[str, Any] | None:
    found = request_json("GET", _url(f"/reports/publications?key={quote(key)}"))["publications"]
    return found[0] if found else None


def notify(args: dict[str, Any], key: str) -> dict[str, Any]:
    return request_json("POST", _url("/notify"), body=args, key=key)


def find_notification(key: str, args: dict[str, Any]) -> dict[str, Any] | None:
    found = request_json("GET", _url(f"/notifications?key={quote(key)}"))["notifications"]
    return found[0] if found else None


def submit_order(args: dict[str, Any], key: str) -> dict[str, Any]:
    """POST /orders with the key as Idempotency-Key; ``args["reference"]`` is the client reference.

    A service that ignores the header still stores the reference, so the order can be
    found again by :func:`find_order` whichever mode it runs in.
    """
    return request_json("POST", _url("/orders"), body=args, key=key)


def find_order(key: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """The order submitted under this client reference (the ledger key), or None."""
    reference = args.get("reference") or key
    found = request_json("GET", _url(f"/orders?reference={quote(reference, safe='')}"))["orders"]
    return found[0] if found else None


def get_ticket(ticket: str) -> dict[str, Any]:
    """GET /tickets/{id} at the support desk."""
    return request_json("GET", _url(f"/tickets/{quote(ticket, safe='')}"))


def get_past_order(order: str) -> dict[str, Any]:
    """GET /orders/{id}: a past order with its customer, address and items."""
    return request_json("GET", _url(f"/orders/{quote(order, safe='')}"))


def get_stock(sku: str) -> dict[str, Any]:
    """GET /stock/{sku}: ``{"sku", "name", "available"}``."""
    return request_json("GET", _url(f"/stock/{quote(sku, safe='')}"))
