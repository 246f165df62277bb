"""Waiting with a true timeout: look until a condition holds or the time is up, and say
how long was actually waited.

``poll`` looks at once, then 50 ms later, backing off to 0.4 s between looks (a quick
condition is seen at once, a long wait costs few reads); it never sleeps past the
deadline and looks a last time at it. ``WaitTimedOut`` carries the seconds measured on
the monotonic clock from the call to the raise (the last look and the description of
what it saw included), and its message states them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
FIRST_PAUSE = 0.05
LONGEST_PAUSE = 0.4


class WaitTimedOut(AssertionError):
    """A wait of the kit ran out. ``waited``: the seconds actually waited; ``timeout``: the
    seconds asked for. The message names what was awaited, both times and what was seen last."""

    def __init__(self, message: str, *, waited: float, timeout: float) -> None:
        super().__init__(message)
        self.waited = waited
        self.timeout = timeout


def checked_timeout(timeout: float) -> float:
    """``timeout`` as seconds; ValueError naming it unless it is a number above 0."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds above 0, not {timeout!r}")
    return float(timeout)


def poll(look: Callable[[], T | None], *, timeout: float, what: str, last_seen: Callable[[], str]) -> T:
    """``look()`` until it returns something true, and return that. After ``timeout``
    seconds: WaitTimedOut "<what>: not after <waited> s (timeout <timeout> s); <last_seen()>"."""
    timeout = checked_timeout(timeout)
    began = time.monotonic()
    deadline = began + timeout
    pause = FIRST_PAUSE
    while True:
        found = look()
        if found:
            return found
        left = deadline - time.monotonic()
        if left <= 0:
            seen = last_seen()
            waited = time.monotonic() - began  # up to the raise: what the caller waited
            raise WaitTimedOut(
                f"{what}: not after {waited:.1f} s (timeout {timeout:g} s); {seen}", waited=waited, timeout=timeout
            )
        time.sleep(min(pause, left))
        pause = min(pause * 1.5, LONGEST_PAUSE)
