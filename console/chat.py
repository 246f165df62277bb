"""The chat view of a conversation execution (``support_chat``): each turn the customer's
message, the agent's answer and the tool calls it made (with who approved what), read
from the record — the agent step's visits and the waits between them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from approvals.models import ApprovalRequest
from executions.models import Execution, StepRun, Wait

# Workflows whose execution page is a chat: (the agent step, the wait for the next message).
CHATS = {"support_chat": ("answer", "next")}
MESSAGE = "customer_message"


@dataclass(frozen=True)
class Turn:
    n: int
    message: str
    answer: str | None
    calls: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)


def is_chat(execution: Execution) -> bool:
    return execution.workflow in CHATS


def turns(execution: Execution) -> list[Turn]:
    """Every answered turn, oldest first, and the one being answered (answer None)."""
    agent, wait = CHATS[execution.workflow]
    runs = list(
        StepRun.objects.filter(execution=execution, step=agent, outcome=StepRun.Outcome.SUCCEEDED).order_by("id")
    )
    received = [
        (w.payload or {}).get("text", "")
        for w in Wait.objects.filter(
            execution=execution, step=wait, status=Wait.State.RECEIVED, signal=MESSAGE
        ).order_by("id")
    ]
    messages = [str((execution.input or {}).get("message", "")), *received]
    decided = {
        r.round: f"{r.action} {r.status}" + (f" by {r.decision.approver}" if hasattr(r, "decision") else "")
        for r in ApprovalRequest.objects.filter(execution=execution, step=agent).select_related("decision")
    }
    found = []
    for n, message in enumerate(messages, start=1):
        run = runs[n - 1] if n <= len(runs) else None
        output = run.output if run is not None and isinstance(run.output, dict) else {}
        calls = [c for c in output.get("calls", []) if isinstance(c, dict)]
        approvals = [text for round, text in decided.items() if run is not None and round == run.round]
        found.append(
            Turn(n=n, message=message, answer=output.get("answer") if run else None, calls=calls, approvals=approvals)
        )
    return found
