"""Executions for the retention tests: ended ones made quickly in-process, and a
monthly report run to completion in-process (approved, published on the sandbox), so
the archive holds a guarded effect and its approval."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

from django.db import connection, transaction
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from executions.engine import lifecycle, runner
from executions.models import Execution, Status
from executions.services import execution_start
from tests.support.procs import run_manage
from tests.support.stack import app_env


def ended(user, *, days_ago: float = 200, n: int = 1, workflow: str = "monthly_report", **fields) -> list[Execution]:
    """``n`` executions that started, completed and ended ``days_ago`` days ago (no steps run)."""
    made = []
    for _ in range(n):
        execution, _created = execution_start(user=user, workflow=workflow, input=_input(workflow))
        with transaction.atomic():
            lifecycle.apply(execution, "start")
            lifecycle.apply(execution, "complete")
        backdate(execution, days_ago=days_ago, **fields)
        made.append(execution)
    return made


def backdate(execution: Execution, *, days_ago: float, **fields) -> None:
    Execution.objects.filter(pk=execution.pk).update(
        status_changed_at=timezone.now() - timedelta(days=days_ago), **fields
    )


def live(user, **fields) -> Execution:
    execution, _created = execution_start(user=user, workflow="monthly_report", input=_input("monthly_report"))
    if fields:
        Execution.objects.filter(pk=execution.pk).update(**fields)
    return execution


def published_report(requester, manager, *, days_ago: float = 200) -> Execution:
    """A monthly report drafted, approved by ``manager`` and published (SANDBOX_URL must be the sandbox's)."""
    execution, _created = execution_start(user=requester, workflow="monthly_report", input={"month": "2026-08"})
    for _ in range(20):
        runner.advance(execution.pk, worker="worker:retention-test")
        execution.refresh_from_db()
        if execution.status == Status.AWAITING_APPROVAL:
            break
    request = ApprovalRequest.objects.get(execution=execution, status=ApprovalRequest.State.PENDING)
    approval_decide(
        user=manager,
        execution_ref=execution.ref,
        approval_id=request.pk,
        decision="approve",
        artifact_version=request.version,
        content_sha256=request.content_sha256,
        event_id=f"retention-{execution.pk}",
    )
    for _ in range(20):
        execution.refresh_from_db()
        if execution.status == Status.COMPLETED:
            break
        runner.advance(execution.pk, worker="worker:retention-test")
    assert execution.status == Status.COMPLETED, execution.status_reason
    backdate(execution, days_ago=days_ago)
    return execution


def _input(workflow: str) -> dict:
    return {"month": "2026-08"} if workflow == "monthly_report" else {"original_order": "ORD-1001"}


def archive_storage(settings, root: Path) -> Path:
    """Point the artifact storage (and so the archive) of this process at ``root``."""
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(root)}},
    }
    return root


def owner_dsn() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def keel_archive(tmp: Path, root: Path, *args: str, owner: bool = True, **env: str) -> subprocess.CompletedProcess:
    """``manage.py keel archive ARGS`` as production runs it: the application's role in
    ``DATABASE_URL``, the owner in ``DATABASE_OWNER_URL`` (unless ``owner=False``), the
    archive under ``root``."""
    extra = {"DATABASE_OWNER_URL": owner_dsn()} if owner else {}
    process_env = {**app_env(tmp), "KEEL_ARTIFACTS_ROOT": str(root), "RUNTIME_FAILPOINT_DIR": str(tmp / "fp")}
    process_env.update(extra, **env)
    return run_manage("keel", "archive", *args, env=process_env)
