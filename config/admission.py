"""What the web server's ASGI application puts in front of Django (config/asgi.py): when a
request is let in, and what a body that stops arriving gets.

Django runs every ASGI request's views in a thread of its own, and that thread opens a
database connection of its own (closed when the request ends: config/settings.py,
``CONN_MAX_AGE``). So how many requests a process serves at once is how many PostgreSQL
connections it holds, and nothing in Django bounds it: a burst of 300 requests was 300
threads and 97 of PostgreSQL's 100 connections (issue 38).

``Admission`` guarantees, per web process:

* at most ``concurrency`` requests are inside Django at once (``KEEL_WEB_CONCURRENCY``):
  so the web holds at most ``--workers`` × that many connections per database. The rest
  wait in the event loop, costing a socket and their body, never a thread or a connection;
* a request takes its place only once its whole body has arrived, so slow bodies never
  hold one (docs/operations.md, "The web server");
* a body that sends nothing for ``body_seconds`` (``KEEL_WEB_BODY_SECONDS``) between two
  reads is answered **408** with a JSON body (``{"detail", "timeout_seconds"}``) and its
  connection closed, instead of the server's plain-text 500; Django never sees it.

It never reads or changes a body, a header or a response; other scopes (lifespan) pass
through untouched.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class _Passage:
    """One request's way through: whether its body is in, it holds a place, it timed out,
    its answer began."""

    body_done: bool = False
    holding: bool = False
    timed_out: bool = False
    answered: bool = False


class Admission:
    """The ASGI application ``app`` behind the two rules of the module docstring."""

    def __init__(self, app: App, *, concurrency: int, body_seconds: float) -> None:
        if concurrency < 1 or body_seconds <= 0:
            raise ValueError("Admission needs concurrency >= 1 and body_seconds > 0")
        self.app = app
        self.concurrency = concurrency
        self.body_seconds = body_seconds
        self._places: asyncio.Semaphore | None = None  # made in the serving event loop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._places is None:
            self._places = asyncio.Semaphore(self.concurrency)
        places, passage = self._places, _Passage()

        async def receive_in_time() -> Message:
            if passage.body_done:  # Django's watch for a disconnect: as long as it takes
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.body_seconds)
            except TimeoutError:
                passage.timed_out = True
                return {"type": "http.disconnect"}  # Django drops the request: it answers nothing
            if message["type"] == "http.request" and not message.get("more_body", False):
                passage.body_done = True
                await places.acquire()  # the body is in: wait for a place before Django runs
                passage.holding = True
            return message

        async def send_noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                passage.answered = True
            await send(message)

        try:
            await self.app(scope, receive_in_time, send_noting)
        finally:
            if passage.holding:
                places.release()
        if passage.timed_out and not passage.answered:
            await _send_json(
                send,
                408,
                {
                    "detail": f"the request's body stopped arriving: nothing came for {self.body_seconds:g} s",
                    "timeout_seconds": self.body_seconds,
                },
            )


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    """``body`` as a whole JSON answer that closes the connection (the rest of the request
    is still on the wire: nothing after it can be read as a request)."""
    data = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        (b"cache-control", b"no-store"),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data, "more_body": False})
