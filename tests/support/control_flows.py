"""Workflows the control-flow tests register (tests/scenarios/test_control_flow.py,
docs/design.md §4 "Control flow people write"), written with the authoring surface alone:

- ``expense``: a claim drafted, a manager's decision; approved → paid (an effect guarded
  by the decision), rejected → ``record_rejection`` (``on_reject``), completed either way;
- ``patient``: waits for ``go`` at most ``wait_seconds``; no signal → ``gave_up``
  (``on_timeout``), a signal → ``went`` (the wait's ``then``, declared after ``gave_up``);
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
# A signal in time goes on to ``went`` by the wait's then=, not by the order of declaration.
patient.wait(
    "hold", label="Waiting for go", signal="go", timeout=lambda i: i["wait_seconds"], on_timeout="gave_up", then="went"
)


@patient.step("gave_up", label="Giving up", then=END)
def gave_up(ctx) -> dict:
    return {"went": False, "timed_out": ctx.state["hold"]["timed_out"]}


@patient.step("went", label="Going")
def went(ctx) -> dict:
    return {"went": True, "timed_out": ctx.state["hold"]["timed_out"]}


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


# ``essay`` (S51): draft (a model call) → review (a manager's approval of that draft) →
# again (a branch: back to draft until ``passes`` visits, then on) → publish the approved
# draft (guarded by the review). Each visit: its own model call, its own approval.
class EssayInput(WorkflowInput):
    topic: str = "loops"
    passes: int = 2


essay = register(Workflow(name="essay", version=1, title="An essay, drafted until it reads well", input=EssayInput))


@essay.model_step("draft", label="Drafting", prompt_version="essay-v1")
def draft_essay(ctx, model) -> dict:
    response = model.complete(
        prompt=ctx.prompt(f"Draft a paragraph on {ctx.input['topic']} (pass {ctx.visit})."),
        prompt_version="essay-v1",
        prompt_id="essay",
    )
    text = f"Pass {ctx.visit}: {response.text}"
    ctx.save_artifact("essay", kind="essay", title="Essay", content=text, content_type="text/plain")
    return {"visit": ctx.visit, "text": text}


essay.gate("review", label="Reviewing the draft", spec=Approval(artifact="essay", action="publish_essay"))


@essay.branch("again", label="Another pass?", to=["draft", "publish"])
def again(ctx) -> str:
    return "draft" if ctx.visit < ctx.input["passes"] else "publish"


@essay.effect("publish", label="Publishing the essay", action="publish_essay", guarded_by="review")
def publish_essay(ctx) -> Effect:
    essay_ref = ctx.artifact("essay")
    version = essay_ref["version"]
    args = {"artifact_id": essay_ref["artifact_id"], "version": version, "sha256": essay_ref["sha256"]}
    return Effect(
        key=f"{ctx.ref}:publish:v{version}",
        args=args,
        call=services_client.publish_report,
        lookup=services_client.find_publication,
    )


# ``spinner``: a model call in a loop that never ends by itself; ``max_visits=3`` stops it.
spinner = register(Workflow(name="spinner", version=1, title="Thinks forever", input=EssayInput, max_visits=3))


@spinner.model_step("think", label="Thinking", prompt_version="spin-v1")
def think(ctx, model) -> dict:
    response = model.complete(prompt=ctx.prompt("Think once more."), prompt_version="spin-v1", prompt_id="spin")
    return {"visit": ctx.visit, "thought": response.text}


@spinner.branch("more", label="More?", to=["think", "stop"])
def more(ctx) -> str:
    return "think"


@spinner.step("stop", label="Stopping")
def stop(ctx) -> dict:
    return {}
