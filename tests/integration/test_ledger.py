"""Operator controls around the ledger."""

from __future__ import annotations


def test_resume_is_for_operators_and_only_from_needs_attention(stack, people, api_as):
    stack.up()
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    ref = requester.start()["id"]
    assert requester.post(f"/executions/{ref}/resume", {"reason": "please"}).status_code == 403
    answer = operator.post(f"/executions/{ref}/resume", {"reason": "why not"})
    assert answer.status_code == 409 and "not needs_attention" in answer.json()["detail"]
