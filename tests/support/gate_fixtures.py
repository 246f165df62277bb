"""Fixtures every test folder may use (registered by tests/conftest.py's ``pytest_plugins``):
an execution stopped at its approval gate with a real artifact version (``awaiting``), and
the same needing attention for a publish whose outcome is unknown (``unknown_outcome``)."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from artifacts import store
from artifacts.models import Artifact, ArtifactVersion
from executions.engine import lifecycle
from executions.models import Action, Execution
from tests.support.records import publish_action


@pytest.fixture
def awaiting(people, transactional_db):
    """An execution stopped at its approval gate with a real artifact version."""
    from django.db import transaction

    execution = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={"month": "2026-08"},
        input_digest="d",
        created_by=people["requester"].user,
        current_step="review",
        context={
            "artifacts": {},
            "notes": {
                "goal": "",
                "constraints": [],
                "facts": [],
                "completed_steps": [],
                "open_questions": [],
                "next_action": "",
            },
        },
    )
    blob = store.put(b"# Report\n\nV1 body\n")
    artifact = Artifact.objects.create(kind="report", title="Report", execution=execution)
    version = ArtifactVersion.objects.create(
        artifact=artifact,
        number=1,
        sha256=blob.sha256,
        size=blob.size,
        content_type="text/markdown",
        storage_path=blob.path,
        produced_by_step="draft_report",
    )
    request = ApprovalRequest.objects.create(
        execution=execution,
        step="review",
        artifact_version=version,
        version=1,
        content_sha256=blob.sha256,
        action="publish_report",
        requested_by=people["requester"].user,
    )
    with transaction.atomic():
        lifecycle.apply(execution, "start")
        lifecycle.apply(execution, "await_approval")
    return execution, request


@pytest.fixture
def unknown_outcome(people, awaiting):
    """An execution that needs attention because its publish outcome is unknown."""
    from django.db import transaction

    execution, request = awaiting
    with transaction.atomic():
        execution = Execution.objects.get(pk=execution.pk)
        lifecycle.apply(execution, "resume_after_decision")
        execution = Execution.objects.get(pk=execution.pk)
        lifecycle.apply(execution, "flag", reason="outcome of publish can't be established")
    action = publish_action(execution, Action.State.UNKNOWN)
    return execution, action
