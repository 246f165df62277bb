"""The Task API's answers as the client reads them (pydantic models).

Each model names the schema of the server's ``/api/openapi.json`` it mirrors
(``SERVER_SCHEMA``); every field declared here exists there (the drift test checks it).
Fields a newer server adds are ignored, never an error.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    SERVER_SCHEMA: ClassVar[str]


class PendingApproval(_Answer):
    SERVER_SCHEMA = "PendingApprovalOut"
    id: int
    artifact_id: str
    artifact_version: int
    content_sha256: str
    action: str
    expires_at: datetime | None = None


class PendingGate(_Answer):
    SERVER_SCHEMA = "PendingGateOut"
    kind: str
    step: str
    waiting_for: str
    since: datetime | None = None
    until: datetime | None = None


class Action(_Answer):
    SERVER_SCHEMA = "ActionOut"
    key: str
    type: str
    status: str
    attempts: int


class Artifact(_Answer):
    SERVER_SCHEMA = "ArtifactOut"
    artifact_id: str
    version: int
    sha256: str
    size: int
    content_type: str
    produced_by_step: str


class Stuck(_Answer):
    SERVER_SCHEMA = "StuckOut"
    reason: str
    since: datetime | None = None
    detail: str
    action: str


class Parent(_Answer):
    SERVER_SCHEMA = "ParentOut"
    id: str
    step: str


class Child(_Answer):
    SERVER_SCHEMA = "ChildOut"
    id: str
    workflow: str
    status: str
    step: str


class Cost(_Answer):
    SERVER_SCHEMA = "CostOut"
    usd: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    budget_usd: float | None = None


class Execution(_Answer):
    """``GET /api/executions/{id}`` (and what start, cancel and the list answer with)."""

    SERVER_SCHEMA = "ExecutionOut"
    id: str
    workflow: str
    workflow_version: int
    status: str
    status_reason: str = ""
    current_step: str = ""
    step_label: str = ""
    input: dict[str, Any]
    created_by: str = ""
    pending_approval: PendingApproval | None = None
    pending_gate: PendingGate | None = None
    pending_input: dict[str, Any] | None = None
    actions: list[Action] = []
    artifacts: list[Artifact] = []
    created_at: datetime
    updated_at: datetime
    status_changed_at: datetime | None = None
    due_at: datetime | None = None
    stuck: Stuck | None = None
    parent: Parent | None = None
    children: list[Child] = []
    cost: Cost | None = None
    paused_from: str | None = None
    result: Any = None
    trace_id: str = ""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class ExecutionPage(_Answer):
    """``GET /api/executions``: a page, newest first; ``next`` is the cursor of the following one."""

    SERVER_SCHEMA = "ExecutionPage"
    items: list[Execution]
    next: str | None = None


class Decision(_Answer):
    """``POST …/events`` ``approval.decision`` → 202."""

    SERVER_SCHEMA = "DecisionOut"
    approval_id: int
    decision: str
    event_id: str
    decided_by: str
    execution_status: str


class SignalAnswer(_Answer):
    """``POST …/events`` ``signal`` → 202."""

    SERVER_SCHEMA = "SignalOut"
    event_id: str
    execution_status: str


TERMINAL = frozenset({"completed", "failed", "cancelled"})

# Every model the client declares, for the drift test (tests/integration/test_client.py).
MODELS: tuple[type[_Answer], ...] = (
    PendingApproval,
    PendingGate,
    Action,
    Artifact,
    Stuck,
    Parent,
    Child,
    Cost,
    Execution,
    ExecutionPage,
    Decision,
    SignalAnswer,
)
