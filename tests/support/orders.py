"""The sandbox's order service as the tests drive it: its de-duplication switched, a fault
added, the orders it holds for a client reference."""

from __future__ import annotations

from typing import Any

from tests.support.procs import http


def orders_mode(stack, *, idempotent: bool) -> None:
    answer = http().post(f"{stack.sandbox_url}/_config", json={"orders_idempotent": idempotent}, timeout=5)
    assert answer.status_code == 200 and answer.json()["orders_idempotent"] is idempotent, answer.text


def add_fault(stack, **fault: Any) -> None:
    answer = http().post(f"{stack.sandbox_url}/_faults", json=fault, timeout=5)
    assert answer.status_code == 201, answer.text


def orders_with_reference(stack, reference: str) -> list[dict]:
    answer = http().get(f"{stack.sandbox_url}/orders", params={"reference": reference}, timeout=5)
    assert answer.status_code == 200, answer.text
    return answer.json()["orders"]
