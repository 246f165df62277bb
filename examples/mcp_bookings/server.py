"""The room-booking desk's MCP server, written with the ``mcp`` SDK's ``MCPServer`` (the
SDK's FastMCP) and knowing nothing of keel: ``list_rooms`` (a read), ``book_room`` (a
write that first asks the person to confirm: an elicitation) and ``find_booking`` (what
was booked under a client's idempotency key). Bookings are the server's own record, a
JSON file (``BOOKINGS_FILE``); a call whose ``_meta`` carries ``keel/idempotency_key``
books at most once under it (the same booking is answered again).

Run over stdio (``python -m examples.mcp_bookings.server``, how keel's worker starts
it) or streamable HTTP (``… --http PORT``).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from pydantic import BaseModel, Field

ROOMS = {"Aurora": 4, "Borealis": 8, "Cumulus": 12}
KEY = "keel/idempotency_key"

server = MCPServer("bookings")


class Confirmation(BaseModel):
    confirm: bool = Field(description="Book it?")
    note: str = Field(default="", description="A note for the front desk")


@contextmanager
def _bookings():
    """The bookings file, locked for this process while the block runs."""
    path = Path(os.environ.get("BOOKINGS_FILE", "bookings.json"))
    path.touch()
    with path.open("r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        text = f.read()
        bookings = json.loads(text) if text.strip() else []
        yield bookings
        f.seek(0)
        f.truncate()
        f.write(json.dumps(bookings, indent=1))


@server.tool()
def list_rooms(day: str) -> dict:
    """The meeting rooms free on a day (YYYY-MM-DD), with their seats."""
    with _bookings() as bookings:
        taken = {b["room"] for b in bookings if b["day"] == day}
    return {"day": day, "free": [{"room": r, "seats": s} for r, s in ROOMS.items() if r not in taken]}


def _confirm(room: str, day: str, people: int) -> Elicit[Confirmation]:
    return Elicit(f"Book {room} on {day} for {people} people?", Confirmation)


@server.tool()
def book_room(
    room: str, day: str, people: int, confirmation: Annotated[Confirmation, Resolve(_confirm)], ctx: Context
) -> dict:
    """Book a meeting room for a day; the person is asked to confirm first."""
    if room not in ROOMS:
        raise ValueError(f"there is no room {room}")
    if not confirmation.confirm:
        return {"booked": False, "room": room, "day": day}
    key = (ctx.request_context.meta or {}).get(KEY)
    with _bookings() as bookings:
        if key:
            for booking in bookings:
                if booking["key"] == key:
                    return {**booking, "replayed": True}
        booking = {
            "booking_id": f"BKG-{len(bookings) + 1:04d}",
            "key": key,
            "room": room,
            "day": day,
            "people": people,
            "note": confirmation.note,
            "booked": True,
        }
        bookings.append(booking)
    return {**booking, "replayed": False}


@server.tool()
def find_booking(key: str) -> dict:
    """The booking made under a client's idempotency key, if any."""
    with _bookings() as bookings:
        found = [b for b in bookings if b["key"] == key]
    return {"found": found[0] if found else None}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
