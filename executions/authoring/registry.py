"""Workflow registry: every deployed (name, version). An execution pins its version.

Modules listed in ``settings.RUNTIME_WORKFLOW_MODULES`` register their workflows on
import; an execution keeps running the version it started on even after a newer one
is deployed, as long as the old module stays listed.
"""

from __future__ import annotations

from importlib import import_module

from django.conf import settings

from .workflow import Workflow

_workflows: dict[tuple[str, int], Workflow] = {}


class UnknownWorkflow(LookupError):
    pass


def register(workflow: Workflow) -> Workflow:
    key = (workflow.name, workflow.version)
    existing = _workflows.get(key)
    if existing is not None and existing is not workflow:
        raise ValueError(f"workflow {workflow.name} v{workflow.version} registered twice")
    workflow.check_edges()
    _workflows[key] = workflow
    return workflow


def get(name: str, version: int) -> Workflow:
    try:
        return _workflows[(name, version)]
    except KeyError:
        raise UnknownWorkflow(f"workflow {name} v{version} is not deployed on this process") from None


def latest(name: str) -> Workflow:
    versions = [wf for (n, _), wf in _workflows.items() if n == name]
    if not versions:
        raise UnknownWorkflow(f"unknown workflow {name!r}; known: {', '.join(names()) or 'none'}")
    return max(versions, key=lambda wf: wf.version)


def versions(name: str) -> list[int]:
    """The deployed versions of ``name``, oldest first (empty when none)."""
    return sorted(v for n, v in _workflows if n == name)


def names() -> list[str]:
    return sorted({n for n, _ in _workflows})


def load_configured_workflows() -> None:
    for module in settings.RUNTIME_WORKFLOW_MODULES:
        import_module(module)
