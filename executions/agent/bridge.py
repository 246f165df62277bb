"""An async agent framework's loop beside a worker's own thread.

pydantic-ai, the OpenAI Agents SDK and the MCP client are asyncio; a keel worker is a
plain thread holding a lease, and everything that touches the database — the journal,
the ledger, the fenced writes — must run on it (Django's connections are per thread,
and the lease is the worker's). ``Bridge.run(main)`` runs ``main()`` on an event loop
in a thread of its own and, meanwhile, serves on the caller's thread whatever the loop
asks through ``await bridge.serve(fn, *args)``. So the framework drives its loop, and
each model request and tool call it makes is answered by the worker's thread.

The first served call that raises (a park at an approval, a lost lease, a budget
spent) stops the bridge: calls the loop asks after it are refused without running —
a sibling of a parked tool call never reaches the ledger — and ``run`` raises that
first exception once the loop has ended. ``on_loop(coro)`` runs a coroutine on the
loop from the caller's thread (a framework's own tool function, called by the ledger).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import queue
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Stopped(Exception):
    """The bridge stopped at an earlier call's exception; this call did not run."""


class Bridge:
    def __init__(self) -> None:
        self._asked: queue.Queue[tuple[Callable[..., Any], tuple[Any, ...], concurrent.futures.Future] | None] = (
            queue.Queue()
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._first: BaseException | None = None

    async def serve(self, fn: Callable[..., T], *args: Any) -> T:
        """On the loop: ``fn(*args)`` run on the caller's thread; its result or exception."""
        answer: concurrent.futures.Future = concurrent.futures.Future()
        self._asked.put((fn, args, answer))
        return await asyncio.wrap_future(answer)

    def on_loop(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """On the caller's thread, while ``run`` serves: ``coro`` run on the loop."""
        assert self._loop is not None, "on_loop is for calls served while the loop runs"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        outcome: concurrent.futures.Future = concurrent.futures.Future()

        async def loop_main() -> T:
            self._loop = asyncio.get_running_loop()
            return await main()

        def loop_thread() -> None:
            try:
                outcome.set_result(asyncio.run(loop_main()))
            except BaseException as exc:
                outcome.set_exception(exc)
            finally:
                self._asked.put(None)

        # The worker's context (the slice's log tags, the step's span) follows into the loop.
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(loop_thread,), name="keel-agent-loop", daemon=True)
        thread.start()
        while (item := self._asked.get()) is not None:
            fn, args, answer = item
            if self._first is not None:
                answer.set_exception(Stopped())
                continue
            try:
                answer.set_result(fn(*args))
            except BaseException as exc:  # the loop sees it; run raises it again
                self._first = exc
                answer.set_exception(exc)
        thread.join()
        if self._first is not None:
            raise self._first
        return outcome.result()
