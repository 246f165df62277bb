"""A workflow written the way a newcomer would, with the authoring surface alone:
``executions.authoring`` (and ``approvals.gate`` for its approval), nothing else of
the project. tests/integration/test_authoring_surface.py checks the imports and runs it end to
end (listed in RUNTIME_WORKFLOW_MODULES next to nothing else).

``greeting_card`` v1: compose a card (an artifact), ask the model to polish it, a
manager approves that exact version, the card is sent (an effect at the sandbox's
``/notify``, keyed by the version), then wait for the signal ``card_delivered`` and
close with what it carried.
"""

import os

from approvals.gate import Approval
from executions.authoring import (
    Effect,
    InvalidInput,
    RetryPolicy,
    SignalPayload,
    Workflow,
    WorkflowInput,
    register,
    request_json,
)


class CardInput(WorkflowInput):
    name: str
    email: str

    def model_post_init(self, context) -> None:
        if "@" not in self.email:
            raise InvalidInput("input.email", "an e-mail address, e.g. ana@example.com")


flow = register(
    Workflow(
        name="greeting_card",
        version=1,
        title="Send a greeting card",
        input=CardInput,
        goal=lambda data: f"Send {data['name']} a greeting card they will like",
        constraints=lambda data: [f"Address {data['name']} by name"],
    )
)


@flow.step("compose", label="Composing the card")
def compose(ctx):
    text = f"Dear {ctx.input['name']},\n\nBest wishes from all of us.\n"
    ctx.save_artifact("card", kind="card", title="The greeting card", content=text, content_type="text/markdown")
    return {"lines": text.count("\n")}


@flow.model_step("polish", label="Asking the model for a closing line", prompt_version="card-v1")
def polish(ctx, model):
    answer = model.complete(prompt=ctx.prompt("Suggest a closing line."), prompt_id="card", prompt_version="card-v1")
    return {"closing": answer.text}


flow.gate("review", label="Awaiting a manager's approval", spec=Approval(artifact="card", action="send_card"))


def _sandbox(path: str) -> str:
    return os.environ["SANDBOX_URL"].rstrip("/") + path


def _find(key: str, args: dict) -> dict | None:
    found = request_json("GET", _sandbox(f"/notifications?key={key}"))["notifications"]
    return found[0] if found else None


@flow.effect(
    "send", label="Sending the approved card", action="send_card", guarded_by="review", retry=RetryPolicy(timeout=5)
)
def send(ctx):
    card = ctx.artifact("card")
    return Effect(
        key=f"{ctx.ref}:send:v{card['version']}",
        args={
            "channel": "email",
            "to": [ctx.input["email"]],
            "subject": "A card for you",
            "body": ctx.artifact_content("card").decode(),
        },
        call=lambda args, key: request_json("POST", _sandbox("/notify"), body=args, key=key),
        lookup=_find,
    )


class Delivered(SignalPayload):
    at: str


flow.wait(
    "delivered", label="Waiting for the delivery receipt", signal="card_delivered", timeout=3600, payload=Delivered
)


@flow.step("close", label="Recording the delivery")
def close(ctx):
    return {"delivered_at": ctx.state["delivered"]["payload"]["at"], "sent": ctx.state["send"]}
