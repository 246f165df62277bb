"""A fuzz case's Celery workers and the kills its schedule asks for.

The schedule's kills come in order. While the next one is a failpoint, every worker
started is armed with it (``RUNTIME_FAILPOINTS=<point>=crash``: the worker SIGKILLs
itself there); while it is a timer, the crew SIGKILLs a worker that many seconds after
the previous kill, if anything is still moving. A dead worker is replaced at once by
one armed with the next kill (or none). A worker armed earlier keeps its failpoint, so
a takeover that runs the same step again dies there too — one more real kill. A worker
SIGKILLed by something else on the machine is one more kill too; one that exits any other
way died on its own, and that is reported.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.procs import Proc

from .specs import Kill


@dataclass
class Hand:
    proc: Proc
    armed: Kill | None


@dataclass
class Crew:
    stack: object  # tests.support.stack.Stack: its own, so workers may be killed
    env: dict[str, str]
    prefix: str
    size: int
    pending: list[Kill]
    hands: list[Hand] = field(default_factory=list)
    kills: list[str] = field(default_factory=list)  # what happened, in order
    died: list[str] = field(default_factory=list)  # workers that died without a kill: their logs' ends
    started: int = 0
    last_kill: float = field(default_factory=time.monotonic)

    def start(self) -> None:
        self.hands = [self._hand() for _ in range(self.size)]

    def _armed_with(self) -> Kill | None:
        head = self.pending[0] if self.pending else None
        return head if head is not None and head.point != "timer" else None

    def _hand(self) -> Hand:
        self.started += 1
        armed = self._armed_with()
        env = {**self.env, **({"RUNTIME_FAILPOINTS": armed.failpoint} if armed else {})}
        proc = self.stack.worker(f"{self.prefix}-{self.started}", ready=False, **env)
        return Hand(proc, armed)

    def tend(self, *, moving: bool) -> None:
        """Replace the dead, fire a due timer kill (only while something is ``moving``)."""
        for i, hand in enumerate(self.hands):
            if hand.proc.alive() or hand.proc.killed:
                continue
            if hand.armed is not None and self._reached(hand):
                self.kills.append(f"{hand.armed} ({hand.proc.name})")
                if self.pending and self.pending[0] == hand.armed:
                    self.pending.pop(0)
            elif hand.proc.popen.returncode == -signal.SIGKILL:  # not by us: the machine's (OOM, a stray kill)
                self.kills.append(f"SIGKILL from outside ({hand.proc.name})")
            else:
                self.died.append(f"{hand.proc.name} exited {hand.proc.popen.returncode}:\n{hand.proc.output()[-2000:]}")
            self.last_kill = time.monotonic()
            self.hands[i] = self._hand()
        head = self.pending[0] if self.pending else None
        due = head is not None and head.point == "timer" and time.monotonic() - self.last_kill >= head.seconds
        if due and moving:
            i = len(self.kills) % len(self.hands)
            self.hands[i].proc.kill()
            self.kills.append(f"{head} ({self.hands[i].proc.name})")
            self.pending.pop(0)
            self.last_kill = time.monotonic()
            self.hands[i] = self._hand()

    def _reached(self, hand: Hand) -> bool:
        """It SIGKILLed itself at its failpoint (the marker is there; it died of SIGKILL, and
        nobody but the failpoint sends that to a worker we didn't kill)."""
        name = hand.armed.failpoint.removesuffix("=crash")
        marker = Path(self.stack.failpoint_dir) / name.replace(":", "__")
        return marker.exists() and hand.proc.popen.returncode == -signal.SIGKILL

    def unreached(self) -> list[str]:
        return [str(k) for k in self.pending]

    def stop(self) -> None:
        for hand in self.hands:
            hand.proc.kill()
