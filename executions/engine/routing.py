"""Queues by kind of work (docs/design.md §4, "Many machines"): which Celery queue rings for an
execution, from ``RUNTIME_QUEUES``.

``RUNTIME_QUEUES`` maps a queue name to what it carries, each a selector:
``kind:<step kind>`` (``kind:model``, ``kind:agent``, ``kind:effect``…),
``workflow:<name>`` or ``step:<workflow>.<step>``. The most specific selector wins
(step, then workflow, then kind); an execution whose current step matches none rings
on the default queue (``CELERY_TASK_DEFAULT_QUEUE``, ``celery``). Control tasks
(sweep, fold, tally…) always go to ``control`` (``CELERY_TASK_ROUTES``), so they never
wait behind steps. With no routes every execution rings on the default queue, and the
runner never stops a slice for routing.

Which queues live workers consume is the worker registry's (``fleet``), plugged in
with ``set_consumers`` when its app loads: the runtime never imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from ..authoring import registry
from ..authoring.workflow import Step, Workflow

CONTROL = "control"
_SELECTORS = ("step", "workflow", "kind")


@cache
def _table(spec: tuple[tuple[str, tuple[str, ...]], ...]) -> dict[tuple[str, str], str]:
    table: dict[tuple[str, str], str] = {}
    for queue, selectors in spec:
        for selector in selectors:
            what, _, value = selector.partition(":")
            if what not in _SELECTORS or not value:
                raise ImproperlyConfigured(
                    f"RUNTIME_QUEUES[{queue!r}]: {selector!r} is not kind:<kind>, workflow:<name> or step:<workflow>.<step>"
                )
            if (what, value) in table and table[(what, value)] != queue:
                raise ImproperlyConfigured(f"RUNTIME_QUEUES: {selector!r} is routed to two queues")
            table[(what, value)] = queue
    return table


def routes() -> dict[tuple[str, str], str]:
    """(selector, value) → queue, from the settings (checked: ImproperlyConfigured)."""
    spec = getattr(settings, "RUNTIME_QUEUES", {}) or {}
    return _table(tuple((q, tuple(s)) for q, s in sorted(spec.items())))


def default_queue() -> str:
    return getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery")


def routed_queues() -> list[str]:
    """Every queue something is routed to: the default, the configured ones, control."""
    return sorted({default_queue(), CONTROL, *routes().values()})


def queue_for_step(workflow: Workflow, step: Step) -> str:
    table = routes()
    if not table:
        return default_queue()
    for key in (("step", f"{workflow.name}.{step.name}"), ("workflow", workflow.name), ("kind", str(step.kind))):
        if key in table:
            return table[key]
    return default_queue()


def queue_for(workflow: str, version: int, current_step: str | None) -> str:
    """The queue of an execution at ``current_step`` (the default one for a version or a
    step no longer deployed: a worker there flags it)."""
    if not routes():
        return default_queue()
    try:
        flow = registry.get(workflow, version)
        step = flow.get_step(current_step or flow.first_step)
    except LookupError:  # an undeployed version or step (UnknownWorkflow, KeyError)
        return default_queue()
    return queue_for_step(flow, step)


# The registry's answer: the queues live workers consume now (None: no registry plugged in).
_consumers: Callable[[], set[str]] | None = None


def set_consumers(provider: Callable[[], set[str]]) -> None:
    global _consumers
    _consumers = provider


def live_queues() -> set[str] | None:
    return _consumers() if _consumers is not None else None
