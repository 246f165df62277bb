"""What a workflow says about a step that starts child executions: ``Child`` and the
gate spec ``StartChildren``. A leaf of the authoring surface (the gate that runs it is
``executions.children``).

    @flow.children("months", label="Waiting for the three monthly reports")
    def months(ctx):
        return [Child(workflow="monthly_report", input={"month": m}, key=m) for m in months_of(ctx.input)]

The function runs when the step is first reached (and again, with the same answer, on
a recovery): it reads ``ctx`` like any step and returns the children to start. The
runtime starts each once, under (the parent, the step, ``key``), in the same
transaction that parks the parent in ``waiting``; once every child is terminal the
step's output is ``{key: {id, workflow, status, state, artifacts, facts}}``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .specs import GateSpec

JSON = dict[str, Any]
# The longest child key the record keeps (Execution.child_key).
MAX_CHILD_KEY = 200


@dataclass(frozen=True)
class Child:
    """One child execution to start: the latest deployed version of ``workflow`` with
    ``input`` (validated as an API start would be), known to the parent as ``key``
    (unique within the step; its output is under that key)."""

    workflow: str
    input: JSON = field(default_factory=dict)
    key: str = ""

    def problem(self) -> str:
        """Why the runtime can't start it as declared ("" when it can)."""
        if not isinstance(self.key, str) or not self.key.strip():
            return "a child needs a key (unique within its step)"
        if len(self.key) > MAX_CHILD_KEY:
            return f"a child's key is at most {MAX_CHILD_KEY} characters"
        if not isinstance(self.input, dict):
            return f"the input of child {self.key} must be a JSON object"
        return ""


@dataclass(frozen=True, kw_only=True)
class StartChildren(GateSpec):
    """A children step's spec: ``start(ctx)`` returns the ``Child``s to start."""

    kind: ClassVar[str] = "children"
    start: Callable[[Any], list[Child]]
