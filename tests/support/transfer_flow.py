"""Temporal's money transfer as a user ports it (registered on import): withdraw, then
deposit; a deposit the bank refuses for good goes on at ``refund`` (``on_failure``),
which gives the money back under a key of its own. The bank is ``BANK``, in this
process (the tests advance the steps here): what it took and gave, by key, and the
answer it gives to a withdrawal or deposit on an account (``DEPOSITS``: ``"refuse"``, ``"lose"``
the answer, ``"flaky"``: a 503, and the deposit tries once, ``"partly"``: a receipt
with a ``failed`` field, or ``"die"``: the deposit goes through and the worker dies in
the call, and a deposit asked again is refused). An account ``nodedup-…`` is at a bank that ignores keys."""

from __future__ import annotations

from approvals.gate import Approval
from executions.authoring import END, Effect, FailureKind, RetryPolicy, StepFailure, Workflow, WorkflowInput, register

BANK: dict[str, dict] = {}  # key → {"op", "account", "cents"}
DEPOSITS: dict[str, str] = {}  # account → how its deposits answer


class TransferInput(WorkflowInput):
    from_account: str = "A-1"
    to_account: str = "B-2"
    amount_cents: int = 2500


def _take(op: str):
    def call(args: dict, key: str) -> dict:
        how = DEPOSITS.get(args["account"], "") if op != "refund" else ""
        if how == "refuse":
            raise StepFailure(FailureKind.INVALID_INPUT, f"account {args['account']} is closed")
        if how == "lose":
            raise StepFailure(FailureKind.OUTCOME_UNKNOWN, "the bank's answer was lost")
        if how == "flaky":
            raise StepFailure(FailureKind.TRANSIENT, "the bank answered 503")
        if how == "die":  # the worker dies in the call: the deposit is left in flight
            DEPOSITS[args["account"]] = "took"
            BANK[key] = {"op": op, **args}
            raise SystemExit("the worker died while the bank was depositing")
        if how == "took":  # it did go through before the worker died: asked again, it is a repeat
            raise StepFailure(FailureKind.INVALID_INPUT, f"a second deposit of {key}")
        if how == "partly":  # a receipt that names a failure is still a receipt
            BANK[key] = {"op": op, **args}
            return {"failed": {"count": 0}, "confirmation": "PARTLY-1"}
        BANK[key] = {"op": op, **args}
        return {"confirmation": f"{op.upper()}-{len(BANK)}"}

    return call


transfer = register(Workflow(name="transfer", version=1, title="A money transfer", input=TransferInput))


@transfer.effect("withdraw", label="Withdrawing", action="withdraw")
def withdraw(ctx) -> Effect:
    args = {"account": ctx.input["from_account"], "cents": ctx.input["amount_cents"]}
    return Effect(key=f"{ctx.ref}:withdraw", args=args, call=_take("withdraw"))


@transfer.effect(
    "deposit",
    label="Depositing",
    action="deposit",
    on_failure="refund",
    then=END,
    retry=RetryPolicy(max_attempts=1),
)
def deposit(ctx) -> Effect:
    args = {"account": ctx.input["to_account"], "cents": ctx.input["amount_cents"]}
    # An account "nodedup-…" is at a bank that ignores the Idempotency-Key.
    dedupes = not args["account"].startswith("nodedup")
    return Effect(key=f"{ctx.ref}:deposit", args=args, call=_take("deposit"), honors_key=dedupes)


@transfer.effect("refund", label="Refunding the withdrawal", action="refund", then=END)
def refund(ctx) -> Effect:
    args = {"account": ctx.input["from_account"], "cents": ctx.input["amount_cents"]}
    return Effect(key=f"{ctx.ref}:refund", args=args, call=_take("refund"))


# The same transfer, approved first: a manager allows the deposit of exactly the transfer
# order an earlier step wrote (Approval), and the deposit is guarded by that approval.
approved_transfer = register(
    Workflow(name="approved_transfer", version=1, title="A money transfer a manager approves", input=TransferInput)
)


@approved_transfer.step("write_order", label="Writing the transfer order")
def write_order(ctx) -> dict:
    i = ctx.input
    text = f"# Transfer\n\n{i['amount_cents']} cents from {i['from_account']} to {i['to_account']}\n"
    ctx.save_artifact("order", kind="transfer", title="The transfer order", content=text, content_type="text/markdown")
    return {"characters": len(text)}


approved_transfer.gate(
    "review", label="Awaiting a manager's approval", spec=Approval(artifact="order", action="deposit")
)
approved_transfer.effect("withdraw", label="Withdrawing", action="withdraw")(withdraw)
approved_transfer.effect(
    "deposit",
    label="Depositing",
    action="deposit",
    guarded_by="review",
    on_failure="refund",
    then=END,
    retry=RetryPolicy(max_attempts=1),
)(deposit)
approved_transfer.effect("refund", label="Refunding the withdrawal", action="refund", then=END)(refund)
