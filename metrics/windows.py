"""The time windows the measures are computed over: ``<n>h`` or ``<n>d`` (docs/design.md §6)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

_PATTERN = re.compile(r"([1-9][0-9]{0,3})([hd])")
LONGEST = timedelta(days=366)
# Chart intervals, shortest first: a window is cut into at most MAX_POINTS of the first that fits.
INTERVALS = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400)
MAX_POINTS = 60


def parse(text: str) -> timedelta:
    """``24h`` → 24 hours, ``7d`` → 7 days; ValueError (with a sentence) for anything else."""
    found = _PATTERN.fullmatch(text or "")
    if not found:
        raise ValueError(f"{text!r} is not a window: write <n>h or <n>d, e.g. 1h, 24h, 7d")
    n, unit = int(found[1]), found[2]
    length = timedelta(hours=n) if unit == "h" else timedelta(days=n)
    if length > LONGEST:
        raise ValueError(f"{text!r} is longer than the longest window, {LONGEST.days}d")
    return length


def check(text: str) -> str:
    """For a pydantic ``AfterValidator``: the window unchanged, or ValueError."""
    parse(text)
    return text


@dataclass(frozen=True)
class Window:
    """``[since, until)``: the last ``length`` up to ``until``."""

    until: datetime
    length: timedelta

    @property
    def since(self) -> datetime:
        return self.until - self.length

    def previous(self) -> Window:
        """The window of the same length just before this one (for trends)."""
        return Window(until=self.since, length=self.length)

    @property
    def interval_seconds(self) -> int:
        """The charts' interval: the shortest of INTERVALS that cuts it into at most MAX_POINTS."""
        total = self.length.total_seconds()
        return next((i for i in INTERVALS if total / i <= MAX_POINTS), INTERVALS[-1])
