"""Retention (issue 23): the policy, the archive and its manifest chain, the purge as the
owner role (the application role still can't), tombstones and the 410, legal holds,
``keel archive`` and its bad input. The crash and tamper scenarios (S43–S45) are in
tests/scenarios/test_retention.py."""

from __future__ import annotations

import gzip
import io
import json

import pytest
from django.core.management import call_command
from django.test import Client

from approvals.models import ApprovalRequest, Decision
from executions.models import Action, Execution, ExecutionEvent, ExecutionTombstone
from retention import reader
from retention.archiver import archive_run
from retention.verify import verify
from tests.support import retention as made
from triage import tallies


@pytest.fixture
def root(settings, tmp_path):
    return made.archive_storage(settings, tmp_path / "store")


def bearer(person) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {person.token}"}


def test_an_approved_report_is_archived_chained_purged_and_read_back(people, sandbox, settings, root):
    settings.SANDBOX_URL = sandbox.url
    report = made.published_report(people["requester"].user, people["manager"].user)
    approval = ApprovalRequest.objects.get(execution=report)
    decision = Decision.objects.get(request=approval)
    older = made.ended(people["requester"].user, n=2)
    tallies.refresh(force=True)  # the counts' tallies hold the old executions

    first = archive_run(batch=2)  # two batches: the chain has two links
    assert first.archived == 3 and len(first.manifests) == 2
    # The purge retook the tallies: the counts don't count what is gone.
    assert sum(tallies.summary()["by_status"].values()) == Execution.objects.count()
    assert sum(tallies.action_counts().values()) == Action.objects.count()
    files = sorted(p.name for p in (root / "archive").iterdir())
    assert len([f for f in files if f.endswith(".manifest.json")]) == 2
    assert len([f for f in files if f.endswith(".jsonl.gz")]) == 2
    second = json.loads((root / first.manifests[1]).read_text())
    assert second["previous"]["name"] == first.manifests[0] and second["seq"] == 2
    assert second["policy"]["retention_days"] == 90

    # Every row is gone from the database, a tombstone stays, the API answers 410.
    for execution in [report, *older]:
        assert not Execution.objects.filter(pk=execution.pk).exists()
        assert not ExecutionEvent.objects.filter(execution_id=execution.pk).exists()
    assert not ApprovalRequest.objects.filter(pk=approval.pk).exists()
    tombstone = ExecutionTombstone.objects.get(pk=report.pk)
    answer = Client().get(f"/api/executions/{report.ref}", **bearer(people["requester"]))
    assert answer.status_code == 410
    assert set(answer.json()) == {"detail", "archived_at", "manifest"}
    assert answer.json()["manifest"] == tombstone.manifest

    # The archive proves approval integrity and answers "who approved what, when".
    report_check = verify()
    assert report_check.ok, report_check.findings
    assert report_check.guarded_effects == 1 and report_check.executions == 3
    record = reader.archived_execution(report.ref)
    (shown,) = record["approvals"]
    assert shown["decision"]["decided_by_username"] == "manager"
    assert shown["content_sha256"] == decision.content_sha256 == approval.content_sha256
    assert any(a["type"] == "publish_report" and a["status"] == "succeeded" for a in record["actions"])
    text = "\n".join(reader.lines_for_people(record))
    assert "approve by manager" in text and approval.content_sha256 in text

    # The data file is gzip JSON Lines, one row a line.
    data = root / json.loads((root / tombstone.manifest).read_text())["files"][0]["name"]
    lines = [json.loads(line) for line in gzip.decompress(data.read_bytes()).splitlines()]
    assert {"execution", "model", "pk", "row"} == set(lines[0])


def test_the_policy_keeps_what_is_live_recent_or_declared_longer(people, root, settings):
    user = people["requester"].user
    (old,) = made.ended(user, days_ago=91)
    (recent,) = made.ended(user, days_ago=89)
    (kept_longer,) = made.ended(user, days_ago=120, workflow="replacement_order")
    running = made.live(user)
    made.backdate(running, days_ago=400)  # long ago, but not terminal: never archived
    from executions.authoring import registry

    flow = registry.latest("replacement_order")
    flow.retention_days = 365  # as its declaration would say: Workflow(..., retention_days=365)
    try:
        dry = archive_run(dry_run=True)
        assert dry.would_archive == 1 and not list(root.glob("archive/*"))
        done = archive_run()
        assert done.archived == 1
        assert ExecutionTombstone.objects.filter(pk=old.pk).exists()
        assert Execution.objects.filter(pk__in=[recent.pk, kept_longer.pk, running.pk]).count() == 3
        everything = archive_run(older_than_days=0)  # 0d: every terminal execution, overrides included
        assert everything.archived == 2
        assert Execution.objects.filter(pk=running.pk).exists()
    finally:
        flow.retention_days = None


def test_legal_holds_through_the_api(people, root):
    (execution,) = made.ended(people["requester"].user)
    auditor, operator = Client(), Client()
    url = f"/api/executions/{execution.ref}/hold"
    refused = operator.post(url, {"reason": "x"}, content_type="application/json", **bearer(people["operator"]))
    assert refused.status_code == 403
    blank = auditor.post(url, {"reason": "  "}, content_type="application/json", **bearer(people["auditor"]))
    assert blank.status_code == 422 and blank.json()["detail"][0]["loc"] == ["body", "reason"]
    unknown = auditor.post(
        "/api/executions/RUN_9999/hold", {"reason": "x"}, content_type="application/json", **bearer(people["auditor"])
    )
    assert unknown.status_code == 404
    placed = auditor.post(url, {"reason": "case 42"}, content_type="application/json", **bearer(people["auditor"]))
    assert placed.status_code == 200, placed.content
    assert placed.json()["hold"]["reason"] == "case 42" and placed.json()["hold"]["by"] == "auditor"
    listed = auditor.get("/api/executions?hold=true", **bearer(people["auditor"])).json()["items"]
    assert [i["id"] for i in listed] == [execution.ref]
    assert auditor.get("/api/executions?hold=false", **bearer(people["auditor"])).json()["items"] == []

    screens = Client()
    screens.force_login(people["auditor"].user)
    listed = screens.get("/?hold=yes").content.decode()
    assert execution.ref in listed and "on hold" in listed
    assert execution.ref not in screens.get("/?hold=no").content.decode()
    page = screens.get(f"/executions/{execution.ref}/").content.decode()
    assert 'id="legal-hold"' in page and "case 42" in page

    outcome = archive_run(older_than_days=0)
    assert outcome.archived == 0 and outcome.skipped_on_hold == 1

    released = auditor.delete(url, **bearer(people["auditor"]))
    assert released.status_code == 200 and released.json()["hold"] is None
    types = list(ExecutionEvent.objects.filter(execution=execution).values_list("type", flat=True))
    assert "hold.placed" in types and "hold.released" in types  # audited in its history
    assert archive_run(older_than_days=0).archived == 1
    audit = screens.get("/approvals/audit/").content.decode()
    assert 'id="retention-note"' in audit and "90 days" in audit and "(1 so far)" in audit


def test_an_idempotency_key_of_an_archived_execution_is_not_reused_silently(people, root):
    body = {"workflow": "monthly_report", "input": {"month": "2026-08"}, "idempotency_key": "k-1"}
    client = Client()
    started = client.post("/api/executions", body, content_type="application/json", **bearer(people["requester"]))
    execution = Execution.objects.get(pk=int(started.json()["id"].removeprefix("RUN_")))
    from django.db import transaction

    from executions.engine import lifecycle

    with transaction.atomic():
        lifecycle.apply(execution, "cancel")
    made.backdate(execution, days_ago=100)
    assert archive_run().archived == 1
    again = client.post("/api/executions", body, content_type="application/json", **bearer(people["requester"]))
    assert again.status_code == 410 and again.json()["manifest"]
    assert Execution.objects.count() == 0


def test_keel_archive_bad_input_unreachable_storage_and_the_application_role(people, tmp_path, root):
    (execution,) = made.ended(people["requester"].user)

    bad = made.keel_archive(tmp_path, root, "--older-than", "90")
    assert bad.returncode == 2 and "--older-than" in bad.stderr and "Traceback" not in bad.stderr

    (tmp_path / "not-a-dir").write_text("a file where the storage's folder should be")
    unreachable = made.keel_archive(tmp_path, tmp_path / "not-a-dir" / "x", "--older-than", "0d")
    assert unreachable.returncode == 1 and "nothing purged" in unreachable.stderr, unreachable.stderr
    assert Execution.objects.filter(pk=execution.pk).exists()

    # The application's role may read and archive, never delete: the purge is refused.
    as_app = made.keel_archive(tmp_path, root, "--older-than", "0d", owner=False)
    assert as_app.returncode == 1 and "permission denied" in as_app.stderr, as_app.stderr
    assert Execution.objects.filter(pk=execution.pk).exists()
    assert not ExecutionTombstone.objects.exists()

    # As the owner the next pass finishes that batch from its manifest (once in the archive).
    done = made.keel_archive(tmp_path, root, "--older-than", "0d")
    assert done.returncode == 0, done.stderr
    assert "finished 1 from an interrupted pass" in done.stdout
    assert not Execution.objects.filter(pk=execution.pk).exists()
    shown, dry = io.StringIO(), io.StringIO()
    call_command("keel", "archive", "--show", execution.ref, "--json", stdout=shown)
    assert json.loads(shown.getvalue())["id"] == execution.ref
    call_command("keel", "archive", "--dry-run", "--json", stdout=dry)
    assert json.loads(dry.getvalue()) == {"would_archive": 0, "skipped_on_hold": 0}

    # The newest manifest corrupted: the chain can't go on from it; one sentence naming it.
    manifests = sorted((root / "archive").glob("*.manifest.json"))
    newest = manifests[-1]
    newest.write_text('{"format": "keel-archive/1", "seq": ')
    made.ended(people["requester"].user)
    corrupt = made.keel_archive(tmp_path, root, "--older-than", "0d")
    assert corrupt.returncode == 1, (corrupt.stdout, corrupt.stderr)
    assert corrupt.stderr.startswith(
        f"nothing purged: archive/{newest.name}, the newest manifest, is not valid JSON ("
    ), corrupt.stderr
    assert "Traceback" not in corrupt.stderr and len(corrupt.stderr.strip().splitlines()) == 1
    assert Execution.objects.count() == 1  # nothing purged
    assert sorted((root / "archive").glob("*.manifest.json")) == manifests  # nor archived


def test_a_family_split_over_two_pages_of_candidates_is_archived_once(people, root):
    user = people["requester"].user
    parent, kept, kept_too, child = made.ended(user, n=4)
    for n, execution in enumerate((kept, kept_too)):  # terminal, but each with a live child
        made.live(user, parent=execution, parent_step="fan_out", child_key=f"k{n}")
    made.backdate(child, days_ago=200, parent=parent, parent_step="fan_out", child_key="k")

    outcome = archive_run(older_than_days=0, batch=3)  # the child comes up again on the second page

    assert outcome.archived == 2 and len(outcome.manifests) == 1
    manifest = json.loads((root / outcome.manifests[0]).read_text())
    assert [e["id"] for e in manifest["executions"]] == [parent.ref, child.ref]  # each once
    assert set(ExecutionTombstone.objects.values_list("pk", flat=True)) == {parent.pk, child.pk}
    assert Execution.objects.filter(pk__in=[kept.pk, kept_too.pk]).count() == 2


def test_every_table_that_points_at_an_execution_s_rows_is_archived_with_them():
    """The purge can't leave a row pointing at a deleted one: every concrete foreign key
    from any model to a table of the graph (but the users) puts its model in the graph,
    hidden reverse relations (``related_name="+"``: a schedule's firing, a notification's
    occasion) included."""
    from django.apps import apps
    from django.contrib.auth import get_user_model

    from retention import records

    graphed = {table.model for table in records.graph()}
    missing = sorted(
        f"{model._meta.label}.{field.name} → {field.related_model._meta.label}"
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if field.is_relation
        and field.related_model in graphed
        and field.related_model is not get_user_model()
        and model not in graphed
        and not model._meta.proxy
    )
    assert not missing, missing


def test_a_report_whose_approval_was_told_by_e_mail_is_archived_whole(people, sandbox, settings, root):
    """With notifications on (the default), an approval's occasions and deliveries are the
    execution's rows too: archived and purged with it, never a foreign key left dangling."""
    from notifications.models import Occasion

    settings.SANDBOX_URL = sandbox.url
    report = made.published_report(people["requester"].user, people["manager"].user)
    approval = ApprovalRequest.objects.get(execution=report)
    Occasion.objects.create(request=approval, kind="opened")  # as beat's notifications.sweep records it
    done = archive_run(batch=10)
    assert done.archived == 1
    assert not Execution.objects.filter(pk=report.pk).exists()
    assert not Occasion.objects.exists()


def test_an_archived_execution_s_page_says_where_its_record_is(people, sandbox, settings, root):
    """The dashboard answers 410 for an archived execution, naming the manifest, not a
    404 "mistyped" (the API's 410, on the page)."""
    settings.SANDBOX_URL = sandbox.url
    report = made.published_report(people["requester"].user, people["manager"].user)
    done = archive_run(batch=10)
    assert done.archived == 1
    browser = Client()
    browser.force_login(people["operator"].user)
    for url in (f"/executions/{report.ref}/", f"/executions/{report.ref}/live/"):
        page = browser.get(url)
        assert page.status_code == 410, (url, page.status_code)
        text = page.content.decode()
        assert f"{report.ref} was archived and purged" in text and done.manifests[-1] in text, text
        assert "keel archive --show" in text
    assert browser.get("/executions/RUN_999999/").status_code == 404


def test_an_archived_approval_stays_findable_in_the_histories(people, sandbox, settings, root):
    """Issue 39 item 10: after archiving, an approval's story was a 404 "may have been
    mistyped" and its row vanished from the approval history and the operator audit. Its
    story now says it was archived, when, in which manifest and how to read it back; the
    history (page and CSV) keeps its row marked archived, with who decided what; the
    operator audit says where the execution's acts went."""
    import csv

    settings.SANDBOX_URL = sandbox.url
    report = made.published_report(people["requester"].user, people["manager"].user)
    approval = ApprovalRequest.objects.get(execution=report)
    done = archive_run(batch=10)
    assert done.archived == 1 and not ApprovalRequest.objects.filter(pk=approval.pk).exists()
    manifest = done.manifests[-1]
    auditor = Client()
    auditor.force_login(people["auditor"].user)

    story = auditor.get(f"/approvals/audit/{approval.pk}/")
    assert story.status_code == 200, story.status_code
    text = story.content.decode()
    assert "archived" in text and manifest in text and f"keel archive --show {report.ref}" in text
    tombstone = ExecutionTombstone.objects.get(pk=report.pk)
    assert f"{tombstone.archived_at:%Y-%m-%d %H:%M:%S} UTC" in text
    assert "approve by manager" in text and approval.content_sha256 in text
    assert auditor.get("/approvals/audit/999999/").status_code == 404

    history = auditor.get("/approvals/audit/").content.decode()
    row = history[history.index(f'data-approval="{approval.pk}"') :].split("</tr>")[0]
    assert "archived" in row and report.ref in row and "manager" in row and manifest in row
    assert f'href="/approvals/audit/{approval.pk}/"' in row
    assert f'data-approval="{approval.pk}"' in auditor.get("/approvals/audit/?approver=manager").content.decode()
    assert f'data-approval="{approval.pk}"' not in auditor.get("/approvals/audit/?decision=none").content.decode()
    exported = list(csv.DictReader(io.StringIO(auditor.get("/approvals/audit/export.csv").content.decode())))
    (line,) = [r for r in exported if r["request_id"] == str(approval.pk)]
    assert line["status"] == "archived (approved)" and line["decided_by"] == "manager"
    assert line["decision"] == "approve" and line["execution"] == report.ref and manifest in line["outcome"]

    acts = auditor.get(f"/operator-audit/?execution={report.ref}").content.decode()
    assert 'class="act act-archive"' in acts and manifest in acts and f"keel archive --show {report.ref}" in acts
