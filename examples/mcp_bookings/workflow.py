"""``mcp_bookings`` v1: an agent that books meeting rooms through an MCP server keel did not
write (``examples/mcp_bookings/server.py``, started over stdio for each call).

The server's ``list_rooms`` is a read; its ``book_room`` is an effect keel sends through
the ledger, the key in the call's ``_meta``, and looks up after a crash with the server's
own ``find_booking``; before it books, the server asks the person to confirm (an MCP
elicitation): the execution waits, ``pending_input`` on the API and a form on its page,
until the requester or an operator answers, and the booking goes on. The bookings are
the server's record (``BOOKINGS_FILE``; default ``var/bookings.json``). Offline,
``offline_policy`` plays the model. Result: ``{"answer", "booking"}``. docs/agents.md,
"MCP tools".
"""

import json
import os
import re
import sys
from pathlib import Path

from pydantic import Field

from executions.authoring import Decision, McpServer, Workflow, WorkflowInput, mcp_tools, register

HERE = Path(__file__).resolve().parent
DAY = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")

bookings = McpServer(
    "bookings",
    command=[sys.executable, str(HERE / "server.py")],
    env={
        "BOOKINGS_FILE": os.environ.get("BOOKINGS_FILE")
        or str(Path(os.environ.get("KEEL_VAR_DIR", "var")) / "bookings.json")
    },
    honors_key=True,  # book_room books once under _meta["keel/idempotency_key"]
)
TOOLS = mcp_tools(
    bookings,
    effects={"book_room": lambda args, ctx: f"{ctx.ref}:book:{args['room']}:{args['day']}"},
    lookups={"book_room": "find_booking"},
)


class BookingInput(WorkflowInput):
    request: str = Field(min_length=1, max_length=500, examples=["A room for 6 people on 2026-12-14"])


def offline_policy(request) -> Decision:
    """List the rooms free that day, book the smallest that seats everyone, then answer."""
    done = {m["name"]: json.loads(m["content"]) for m in request.messages if m["role"] == "tool"}
    day = DAY.search(request.user_text)
    people = next((int(w) for w in re.findall(r"\b(\d{1,3}) people\b", request.user_text)), 1)
    if day is None:
        return Decision(text="Which day? Write it as 2026-12-14.")
    if "list_rooms" not in done:
        return Decision(text="Looking at the rooms.", tool="list_rooms", args={"day": day.group()})
    seats = [r for r in done["list_rooms"].get("free", []) if r["seats"] >= people]
    if not seats:
        return Decision(text=f"No room seats {people} on {day.group()}.")
    room = min(seats, key=lambda r: r["seats"])["room"]
    booked = done.get("book_room")
    if booked is None:
        return Decision(
            text=f"Booking {room}.", tool="book_room", args={"room": room, "day": day.group(), "people": people}
        )
    if booked.get("booked"):
        return Decision(text=f"{booked['room']} is yours on {booked['day']} ({booked['booking_id']}).")
    return Decision(text="Not booked: you didn't confirm.")


def _result(ctx) -> dict:
    step = ctx.state["book"]
    made = [c["result"] for c in step["calls"] if c["tool"] == "book_room" and c["status"] == "done"]
    return {"answer": step["answer"], "booking": (made[0] or {}).get("booking_id") if made else None}


flow = register(
    Workflow(
        name="mcp_bookings",
        version=1,
        title="Room bookings (an MCP server)",
        input=BookingInput,
        description="An agent that books meeting rooms through an MCP server, which asks the requester to confirm.",
        goal=lambda data: "Book a meeting room as asked",
        result=_result,
    )
)
flow.agent(
    "book",
    label="Booking the room",
    prompt_id="mcp-bookings",
    prompt_version="mcp-bookings-v1",
    instruction=lambda ctx: f"Book a meeting room: {ctx.input['request']}",
    tools=TOOLS,
    offline_policy=offline_policy,
)
