"""Fixtures the integration tests share among themselves (one more than one test folder
uses is in tests/support, registered by tests/conftest.py): a ``manage.py keel``
environment (``env``), five executions in every state an operator acts on (``world``),
one committed row of each append-only table's parents (``rows``), the in-process bank of
tests/support/transfer_flow.py emptied around a test (``bank``)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from approvals.models import ApprovalRequest
from artifacts.models import Artifact, ArtifactVersion
from executions.models import Action, Execution
from tests.support.records import at_publish, publish_action
from tests.support.stack import app_env
from tests.support.transfer_flow import BANK, DEPOSITS


@pytest.fixture
def env(transactional_db, tmp_path) -> dict[str, str]:
    """A ``manage.py keel`` process's environment: the test database, as the application's role."""
    return app_env(tmp_path)


@pytest.fixture
def world(people, awaiting):
    """RUN_1 awaits approval 1 of its report V1; RUN_2 needs attention over an unknown
    outcome; RUN_3 needs attention after a refused publish (resumable); RUN_4 failed at
    publish (restartable from it); RUN_5 was cancelled with a compensation to close."""
    execution, request = awaiting
    other = at_publish(people, execution.context, "flag")
    action = publish_action(other, Action.State.UNKNOWN)
    paused = at_publish(people, execution.context, "flag", month="2026-06")
    publish_action(paused, Action.State.FAILED)
    done = {"retrieve_figures": {}, "analyze": {}, "draft_report": {}, "review": {}}
    failed = at_publish(people, {**execution.context, "carried": done}, "fail", month="2026-05")
    cancelled = at_publish(people, execution.context, "cancel", month="2026-04")
    compensation = Action.objects.create(
        key=f"{cancelled.ref}:publish:v1:compensate",
        execution=cancelled,
        step="publish",
        type="compensate_publish_report",
        status=Action.State.PLANNED,
    )
    return {
        "awaiting": execution,
        "request": request,
        "attention": other,
        "action": action,
        "paused": paused,
        "failed": failed,
        "compensation": compensation,
    }


@pytest.fixture
def rows(transactional_db):
    """One committed row of each append-only table's parents, inserted as the owner."""
    user = get_user_model().objects.create_user("someone")
    execution = Execution.objects.create(
        workflow="monthly_report", workflow_version=1, input={}, input_digest="d", created_by=user
    )
    artifact = Artifact.objects.create(kind="report", title="r", execution=execution)
    version = ArtifactVersion.objects.create(
        artifact=artifact,
        number=1,
        sha256="a" * 64,
        size=1,
        content_type="text/markdown",
        storage_path="x",
        produced_by_step="draft",
    )
    request = ApprovalRequest.objects.create(
        execution=execution,
        step="review",
        artifact_version=version,
        version=1,
        content_sha256="a" * 64,
        action="publish",
        requested_by=user,
    )
    return {"user": user.pk, "execution": execution.pk, "artifact": artifact.pk, "request": request.pk}


@pytest.fixture
def bank():
    """The transfer's bank, empty: what it took and gave, and how its accounts answer."""
    BANK.clear()
    DEPOSITS.clear()
    yield BANK
    BANK.clear()
    DEPOSITS.clear()
