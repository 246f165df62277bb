"""What the screen tests share: a client signed in as a person, a decision form's fields,
an execution stopped at its approval gate on report versions of given contents."""

from __future__ import annotations

import uuid

import requests
from django.db import transaction
from django.test import Client

from approvals import audit
from approvals.models import ApprovalRequest, AuditEntry
from artifacts import store
from artifacts.models import Artifact, ArtifactVersion
from executions.engine import lifecycle
from executions.models import Execution
from tests.support.procs import http

# The Content-Security-Policy every page is served with (config/csp.py).
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)

V1 = b"# Report\n\nSales: 100\nStatus: draft\nRegion: north\n"
V2 = b"# Report\n\nSales: 120\nStatus: final\nRegion: north\n"


def signed_in(stack, person) -> requests.Session:
    """A session with ``stack``'s web process, signed in as ``person``: its pages are
    rendered there, where the test workflows are registered as a deployment's would be
    (the pytest process may have none of them)."""
    client = Client()
    client.force_login(person.user)
    session = http()
    session.cookies.set("sessionid", client.cookies["sessionid"].value)
    return session


def page(stack, person, path: str) -> str:
    """``path`` as ``stack``'s web process renders it for ``person`` (200, or it fails)."""
    answer = signed_in(stack, person).get(f"{stack.web_url}{path}", timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.text


def logged_in(person, **kwargs) -> Client:
    client = Client(**kwargs)
    client.force_login(person.user)  # the login form itself is tested in tests/integration/test_accounts.py
    return client


def decide_form(request, **over) -> dict:
    return {
        "decision": "approve",
        "artifact_version": request.version,
        "content_sha256": request.content_sha256,
        "event_id": uuid.uuid4().hex,
        **over,
    }


def make_gate(
    people,
    *,
    requested_by: str = "requester",
    contents: tuple[bytes, ...] = (V1, V2),
    workflow: str = "monthly_report",
    awaiting: bool = True,
    **policy,
) -> ApprovalRequest:
    """An execution stopped at its approval gate on the last of ``contents``' versions."""
    requester = people[requested_by].user
    execution = Execution.objects.create(
        workflow=workflow,
        workflow_version=1,
        input={"month": "2026-08"},
        input_digest="d",
        created_by=requester,
        current_step="review",
        context={"artifacts": {}, "notes": {}},
    )
    artifact = Artifact.objects.create(kind="report", title="Monthly report", execution=execution)
    version = None
    for number, content in enumerate(contents, start=1):
        blob = store.put(content)
        version = ArtifactVersion.objects.create(
            artifact=artifact,
            number=number,
            sha256=blob.sha256,
            size=blob.size,
            content_type="text/markdown",
            storage_path=blob.path,
            produced_by_step="draft_report",
        )
    with transaction.atomic():
        lifecycle.apply(execution, "start")
        request = ApprovalRequest.objects.create(
            execution=execution,
            step="review",
            artifact_version=version,
            version=version.number,
            content_sha256=version.sha256,
            action="publish_report",
            requested_by=requester,
            **policy,
        )
        lifecycle.record(
            execution,
            "approval.requested",
            step="review",
            actor_label="worker-1",
            payload={"approval_id": request.pk, "artifact_version": version.number, "content_sha256": version.sha256},
        )
        audit.record(
            AuditEntry.Kind.REQUESTED,
            request=request,
            actor=requester,
            artifact_version=version.number,
            content_sha256=version.sha256,
            action=request.action,
        )
        if awaiting:
            lifecycle.apply(execution, "await_approval", step="review")
    return ApprovalRequest.objects.select_related("execution").get(pk=request.pk)
