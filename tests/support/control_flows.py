"""Workflows the control-flow tests register (tests/scenarios/test_control_flow.py,
DESIGN §4 "Control flow people write"), written with the authoring surface alone:

- ``expense``: a claim drafted, a manager's decision; approved → paid (an effect guarded
  by the decision), rejected → ``record_rejection`` (``on_reject``), completed either way;
- ``patient``: waits for ``go`` at most ``wait_seconds``; no signal → ``gave_up``
  (``on_timeout``), a signal → ``went``;
- ``napper``: sleeps ``seconds`` (``flow.sleep``), then wakes;
- ``sorter``: a branch by the size of ``n`` (``small``/``big``/END when n is 0), and an
  effect that acts only for an even ``n`` (returns None otherwise).
"""

from __future__ import annotations

from approvals.gate import Approval
from executions.authoring import END, Effect, Workflow, WorkflowInput, register
from workflows import services_client


class ExpenseInput(WorkflowInput):
    claim: str = "taxi"
    amount: int = 12


def expense_result(ctx) -> dict:
    """What a claim came to: paid (with the order) or rejected (by whom, why)."""
    if "pay" in ctx.state:
        return {"paid": True, "order_id": ctx.state["pay"]["order_id"]}
    return {"paid": False, "rejected_by": ctx.state["record_rejection"]["rejected_by"]}


expense = register(
    Workflow(name="expense", version=1, title="An expense claim", input=ExpenseInput, result=expense_result)
)


@expense.step("draft", label="Drafting the claim")
def draft(ctx) -> dict:
    text = f"{ctx.input['claim']}: {ctx.input['amount']} EUR"
    ctx.save_artifact("claim", kind="claim", title="Expense claim", content=text, content_type="text/plain")
    return {"claim": text}


expense.gate(
    "decision",
    label="Awaiting the manager",
    spec=Approval(artifact="claim", action="pay_expense", on_reject="record_rejection"),
)


@expense.effect("pay", label="Paying the claim", action="pay_expense", guarded_by="decision", then=END)
def pay(ctx) -> Effect:
    key = f"{ctx.ref}:pay"
    args = {"reference": key, "original_order": "ORD-1001", "sku": "EXPENSE", "quantity": ctx.input["amount"]}
    return Effect(key=key, args=args, call=services_client.submit_order, lookup=services_client.find_order)


@expense.step("record_rejection", label="Recording the rejection")
def record_rejection(ctx) -> dict:
    decided = ctx.state["decision"]
    return {"rejected_by": decided["decided_by"], "comment": decided["comment"]}


class PatientInput(WorkflowInput):
    wait_seconds: float = 1.0


patient = register(Workflow(name="patient", version=1, title="Waits, or gives up", input=PatientInput))
patient.wait("hold", label="Waiting for go", signal="go", timeout=lambda i: i["wait_seconds"], on_timeout="gave_up")


@patient.step("went", label="Going", then=END)
def went(ctx) -> dict:
    return {"went": True, "timed_out": ctx.state["hold"]["timed_out"]}


@patient.step("gave_up", label="Giving up")
def gave_up(ctx) -> dict:
    return {"went": False, "timed_out": ctx.state["hold"]["timed_out"]}


class NapInput(WorkflowInput):
    seconds: float = 1.0


napper = register(Workflow(name="napper", version=1, title="Sleeps, then wakes", input=NapInput))
napper.sleep("nap", label="Napping", seconds=lambda ctx: ctx.input["seconds"])


@napper.step("wake", label="Waking")
def wake(ctx) -> dict:
    return {"slept": ctx.state["nap"]["payload"]}


class SortInput(WorkflowInput):
    n: int


sorter = register(Workflow(name="sorter", version=1, title="Sorts by size", input=SortInput))


@sorter.branch("size", label="Choosing by size", to=["small", "big"])
def size(ctx) -> str:
    n = ctx.input["n"]
    if n == 0:
        return END
    if n < 0:
        return "negative"  # not a declared step: a person must look
    return "small" if n < 10 else "big"


@sorter.step("small", label="Small", then="notify")
def small(ctx) -> dict:
    return {"size": "small"}


@sorter.step("big", label="Big")
def big(ctx) -> dict:
    return {"size": "big"}


@sorter.effect("notify", label="Telling of an even n", action="notify_even")
def notify(ctx) -> Effect | None:
    if ctx.input["n"] % 2:
        return None  # nothing to tell
    key = f"{ctx.ref}:notify"
    args = {"channel": "email", "to": ["ops@example.com"], "subject": f"n is {ctx.input['n']}", "body": "even"}
    return Effect(key=key, args=args, call=services_client.notify, lookup=services_client.find_notification)
