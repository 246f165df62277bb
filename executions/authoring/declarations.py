"""Declarations a step kind that plugs in adds to ``Workflow``: ``flow.<name>(…)``.

A kind's module (``executions.engine.kinds``) registers a function
``fn(flow, name, *, label=…, …)`` under the name authors call it by; the function
checks its arguments (a ValueError naming the workflow and the step, refused at import)
and ends with ``flow.declare(kind, name, label=…, spec=…)``, so the step's own
declaration sits in ``Step.spec``. ``Workflow`` looks the name up only when it has no
attribute of its own by it, so a kind can't shadow ``flow.step`` or ``flow.gate``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_declarations: dict[str, Callable[..., Any]] = {}


def declaration(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(flow, step_name, **kwargs)`` as ``flow.<name>(step_name, **kwargs)``."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _declarations[name] = fn
        return fn

    return register


def get(name: str) -> Callable[..., Any] | None:
    return _declarations.get(name)
