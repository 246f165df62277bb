"""Two small workflows the operator-form tests run in process (registered on import):
``asking_room``, an agent whose one tool asks a person before it books (as an MCP
server's elicitation does), and ``flaky_room``, whose one step times out at the room
service (retry_pending, due in 15 minutes)."""

from __future__ import annotations

from executions.authoring import (
    Decision,
    FailureKind,
    ModelRequest,
    RetryPolicy,
    StepFailure,
    Tool,
    ToolArgs,
    Workflow,
    WorkflowInput,
    register,
)
from executions.authoring.foreign import ask_person

# ``asking_room``: an agent whose one tool asks a person before it books (as an MCP
# server's elicitation does): the execution waits at the question for the answer form.
# Its instruction's verb is WORDING's: changed before the answer, the step's journaled
# call no longer matches the request it rebuilds (a model drift).
WORDING = {"verb": "Book"}
ROOM_QUESTION = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "title": "Confirm", "description": "Book it?"},
        "people": {"type": "integer", "title": "People", "minimum": 1, "maximum": 12},
        "note": {"type": "string", "title": "Note", "maxLength": 40},
    },
    "required": ["confirm", "people"],
}


class RoomInput(WorkflowInput):
    room: str = "Cumulus"


class RoomArgs(ToolArgs):
    room: str


def _book(args: dict, progress) -> dict:
    return {"room": args["room"], **ask_person("confirm", f"Book {args['room']}?", ROOM_QUESTION)}


def _books_once(request: ModelRequest) -> Decision:
    if any(m["role"] == "tool" for m in request.messages):
        return Decision(text="booked")
    return Decision(text="booking", tool="book_room", args={"room": "Cumulus"})


asking_room = register(Workflow(name="asking_room", version=1, title="Books a room a person confirms", input=RoomInput))
asking_room.agent(
    "book",
    label="Booking the room",
    prompt_id="asking-room",
    prompt_version="asking-room-v1",
    instruction=lambda ctx: f"{WORDING['verb']} {ctx.input['room']}",
    tools=[Tool(name="book_room", description="Book a room once a person confirms.", args=RoomArgs, run=_book)],
    offline_policy=_books_once,
)


# ``flaky_room``: its one step times out at the room service: retry_pending, due in 15 minutes.
flaky_room = register(
    Workflow(name="flaky_room", version=1, title="Asks a room service that times out", input=RoomInput)
)


@flaky_room.step("ask", label="Asking the room service", retry=RetryPolicy(initial_backoff_seconds=900, jitter=0))
def _times_out(ctx) -> dict:
    raise StepFailure(FailureKind.TRANSIENT, "the room service timed out")
