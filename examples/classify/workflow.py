"""``triage_message`` v1: a customer's message labelled by the ``classify`` step kind
(``examples.classify.kind``, a kind keel doesn't ship), then sent on by a branch on the
label: a refund to the refunds desk, anything else to the helpdesk, where it waits for
the ``answered`` signal. Offline, a keyword policy plays the model; with ``KEEL_MODEL_PROVIDER`` set, the
provider answers, journaled like any other call."""

from pydantic import Field

from executions.authoring import END, Decision, Workflow, WorkflowInput, register

from . import kind  # noqa: F401 - registers the classify step kind and flow.classify

LABELS = ["refund", "question", "complaint"]


class MessageInput(WorkflowInput):
    message: str = Field(
        min_length=1, max_length=2000, description="the customer's message", examples=["Where is my parcel?"]
    )


def keywords(request) -> Decision:
    """The offline model: a refund if the message asks for money back, a complaint if it
    is unhappy, else a question."""
    text = request.user_text.lower()
    if "refund" in text or "money back" in text:
        return Decision(text="refund")
    if any(word in text for word in ("broken", "angry", "terrible", "unacceptable")):
        return Decision(text="complaint")
    return Decision(text="question")


flow = Workflow(
    name="triage_message",
    version=1,
    title="Triage a customer message",
    input=MessageInput,
    goal=lambda data: "Send the customer's message to the desk that handles it",
    result=lambda ctx: {"label": ctx.state["label"]["label"], "desk": ctx.state[ctx.state["route"]["next"]]["desk"]},
)
flow.classify(
    "label",
    label="Labelling the message",
    prompt_id="triage_message.label",
    prompt_version="v1",
    labels=LABELS,
    text=lambda ctx: ctx.input["message"],
    offline_policy=keywords,
)


@flow.branch("route", label="Choosing the desk", to=["refunds", "helpdesk"])
def route(ctx):
    return "refunds" if ctx.state["label"]["label"] == "refund" else "helpdesk"


@flow.step("refunds", label="Handing to the refunds desk", then=END)
def refunds(ctx):
    return {"desk": "refunds"}


@flow.step("helpdesk", label="Handing to the helpdesk")
def helpdesk(ctx):
    return {"desk": "helpdesk", "urgent": ctx.state["label"]["label"] == "complaint"}


flow.wait("answered", label="Waiting for the helpdesk's answer", signal="answered", timeout=7 * 24 * 3600)


register(flow)
