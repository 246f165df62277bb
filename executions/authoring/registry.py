"""Workflow registry: every deployed (name, version). An execution pins its version.

Modules listed in ``settings.RUNTIME_WORKFLOW_MODULES`` (the shipped ones) and then in
``settings.KEEL_WORKFLOW_MODULES`` (a team's own) register their workflows on import; an execution keeps running the version it started on even after a newer one
is deployed, as long as the old module stays listed.
"""

from __future__ import annotations

import logging
import sys
from importlib import import_module
from importlib.util import find_spec

from django.conf import settings

from access import viewer

from .workflow import Workflow

log = logging.getLogger(__name__)

_workflows: dict[tuple[str, int], Workflow] = {}


class UnknownWorkflow(LookupError):
    pass


def register(workflow: Workflow) -> Workflow:
    key = (workflow.name, workflow.version)
    existing = _workflows.get(key)
    if existing is not None and existing is not workflow:
        raise ValueError(f"workflow {workflow.name} v{workflow.version} registered twice")
    if workflow.steps:  # declared before registering: checked now
        workflow.check_edges()
    _workflows[key] = workflow  # else its steps come after this: checked once its module imported (check_all)
    return workflow


def check_all() -> None:
    """Refuse what can't run, in every registered workflow (``Workflow.check_edges``):
    ValueError with one sentence naming the workflow and the step."""
    for workflow in _workflows.values():
        workflow.check_edges()


def get(name: str, version: int) -> Workflow:
    try:
        return _workflows[(name, version)]
    except KeyError:
        raise UnknownWorkflow(f"workflow {name} v{version} is not deployed on this process") from None


def latest(name: str) -> Workflow:
    """The latest version of ``name``. To a person who may not read it (access by workflow,
    ``access.viewer``), a workflow is unknown, and the known ones are those they may read."""
    hidden = viewer.hidden_now()
    versions = [wf for (n, _), wf in _workflows.items() if n == name] if name not in hidden else []
    if not versions:
        known = [n for n in names() if n not in hidden]
        raise UnknownWorkflow(f"unknown workflow {name!r}; known: {', '.join(known) or 'none'}")
    return max(versions, key=lambda wf: wf.version)


def versions(name: str) -> list[int]:
    """The deployed versions of ``name``, oldest first (empty when none)."""
    return sorted(v for n, v in _workflows if n == name)


def names() -> list[str]:
    return sorted({n for n, _ in _workflows})


class WorkflowModuleError(Exception):
    """A module named in ``KEEL_WORKFLOW_MODULES`` did not import: start-up stops with this sentence."""


def configured_modules() -> list[str]:
    """The shipped list (``RUNTIME_WORKFLOW_MODULES``), then the team's own
    (``KEEL_WORKFLOW_MODULES``), each once."""
    return list(dict.fromkeys([*settings.RUNTIME_WORKFLOW_MODULES, *settings.KEEL_WORKFLOW_MODULES]))


def load_configured_workflows() -> None:
    """Import every configured module (each registers its workflows). A team's module that
    fails to import raises WorkflowModuleError naming it and the error, in one sentence."""
    for module in settings.RUNTIME_WORKFLOW_MODULES:
        import_module(module)
    check_all()
    for module in settings.KEEL_WORKFLOW_MODULES:
        if module in settings.RUNTIME_WORKFLOW_MODULES:
            continue
        try:
            fresh, before = module not in sys.modules, len(_workflows)
            import_module(module)
            check_all()
            if fresh and len(_workflows) == before:
                log.warning(_registers_nothing(module))
        except Exception as exc:  # any failure of the team's code: named, never a traceback
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise WorkflowModuleError(
                f"KEEL_WORKFLOW_MODULES names {module}, which does not import: {type(exc).__name__}"
                + (f": {why}" if why else "")
            ) from None


def _registers_nothing(module: str) -> str:
    """What a team's module that imported but registered no workflow is told (a package
    named instead of its workflow module, say; a module that only plugs a kind in is fine)."""
    said = f"KEEL_WORKFLOW_MODULES names {module}, which registered no workflow"
    try:
        inside = find_spec(f"{module}.workflow") is not None
    except (ImportError, ValueError):
        inside = False
    return said + (f" (did you mean {module}.workflow?)" if inside else "")
