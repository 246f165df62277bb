"""Issue 22: ``keel pause`` and ``keel schedules`` (real processes against the test
database, as ``manage.py keel`` runs), their JSON and their exit statuses."""

from __future__ import annotations

import json

from executions import services
from executions.models import Execution, Status
from schedules import services as schedules
from tests.support.cli import keel, refused


def test_keel_pause_then_resume_and_its_refusals(env, people):
    execution = services.execution_start(
        user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"}
    )[0]
    paused = keel(env, "pause", execution.ref, "--reason", "provider outage", "--as", "operator", "--json")
    assert paused.returncode == 0, paused.stderr
    body = json.loads(paused.stdout)
    assert body["status"] == "paused" and body["paused_from"] == "pending" and body["stuck"]["reason"] == "paused"
    refused(keel(env, "pause", execution.ref, "--reason", "again", "--as", "operator"), 3, "paused")
    resumed = keel(env, "resume", execution.ref, "--reason", "over", "--as", "operator")
    assert resumed.returncode == 0, resumed.stderr
    assert Execution.objects.get(pk=execution.pk).status == Status.PENDING


def test_keel_schedules_lists_them_for_operators(env, people):
    made = schedules.schedule_create(user=people["operator"].user, workflow="monthly_report", cron="0 6 1 * *")
    listed = keel(env, "schedules", "--as", "operator", "--json")
    assert listed.returncode == 0, listed.stderr
    [item] = json.loads(listed.stdout)["items"]
    assert item["id"] == made.pk and item["cron"] == "0 6 1 * *" and item["overlap"] == "skip"
    refused(keel(env, "schedules", "--as", "requester"), 4, "operators")
