"""What a workflow says about a gate step: its spec. A leaf, so the authoring surface,
the engine and every gate (``approvals.gate``, ``executions.waits``) share it without
importing each other.

``GateSpec.kind`` names the registered gate that runs the step
(``executions.engine.gates``); a gate kind subclasses it with what it needs
(``approvals.gate.Approval``: the artifact and the action). ``WaitFor`` is the wait
gate's: ``flow.wait(…)`` builds it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

JSON = dict[str, Any]


class GateSpec:
    """What a workflow says about one gate step; ``kind`` names the gate that runs it."""

    kind: ClassVar[str]


@dataclass(frozen=True, kw_only=True)
class WaitFor(GateSpec):
    """A wait gate's spec: the signal ``signal`` (or, with ``signal=""``, only a timer),
    for at most ``timeout`` seconds: a number, or a function of the execution's input.
    Past the timeout, a signal wait needs attention (``waiting_overdue``); a timer
    simply goes on."""

    kind: ClassVar[str] = "wait"
    signal: str
    timeout: float | Callable[[JSON], float]

    def timeout_seconds(self, input: JSON) -> float:
        seconds = self.timeout(input) if callable(self.timeout) else self.timeout
        if not seconds or seconds <= 0:
            raise ValueError(f"a wait's timeout must be positive (got {seconds!r})")
        return float(seconds)
