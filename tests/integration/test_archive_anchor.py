"""Archives can't lose an execution unnoticed (issue 38): the chain's head anchored in the
database, ``keel archive --verify`` checking the storage against it and every tombstone
against the manifests, ``--show`` of a lost execution in one sentence, and tombstones
and anchors the application's role can't delete. Real ``manage.py keel archive``
processes, as production runs them: the application's role in ``DATABASE_URL``, the
owner in ``DATABASE_OWNER_URL``."""

from __future__ import annotations

import json

import psycopg
import pytest
from django.db import connection
from django.test import Client

from executions.models import Execution, ExecutionTombstone
from retention.archiver import archive_run
from retention.models import ArchiveAnchor
from tests.support import retention as made
from tests.support.stack import APP_DB_ROLE


@pytest.fixture
def root(settings, tmp_path):
    return made.archive_storage(settings, tmp_path / "store")


def three_manifests(people, root) -> list[tuple]:
    """Three executions archived one a batch: per manifest (its path, its data file, its execution)."""
    executions = made.ended(people["requester"].user, n=3)
    assert archive_run(older_than_days=0, batch=1).archived == 3
    chain = []
    for path, execution in zip(sorted((root / "archive").glob("*.manifest.json")), executions, strict=True):
        manifest = json.loads(path.read_text())
        assert [e["id"] for e in manifest["executions"]] == [execution.ref]
        chain.append((path, root / manifest["files"][0]["name"], execution))
    return chain


def named(path) -> str:
    return f"archive/{path.name}"


def test_verify_names_the_newest_manifest_removed_with_its_data_file(people, tmp_path, root):
    chain = three_manifests(people, root)
    assert list(ArchiveAnchor.objects.values_list("manifest", flat=True)) == [named(p) for p, _d, _e in chain]
    intact = made.keel_archive(tmp_path, root, "--verify")
    assert intact.returncode == 0, (intact.stdout, intact.stderr)
    assert intact.stdout.strip().splitlines()[-1].startswith("ok: 3 manifests (3 anchored), 3 files, 3 executions")

    newest, data, lost = chain[-1]
    newest.unlink()
    data.unlink()  # what is left still links: 1 → 2, numbered without a gap

    checked = made.keel_archive(tmp_path, root, "--verify")
    assert checked.returncode == 1, (checked.stdout, checked.stderr)
    assert f"{named(newest)}: anchor: the database anchored it as manifest 3" in checked.stdout
    assert f"{named(newest)}: tombstones: 1 purged executions ({lost.ref})" in checked.stdout
    for path, _data, _execution in chain[:-1]:
        assert named(path) not in checked.stdout  # the intact ones are not blamed
    assert "Traceback" not in checked.stderr

    # Its record is lost: --show says so in one sentence (exit 2), naming the manifest.
    shown = made.keel_archive(tmp_path, root, "--show", lost.ref)
    assert shown.returncode == 2, (shown.stdout, shown.stderr)
    assert shown.stderr.strip() == (
        f"{lost.ref} was archived into {named(newest)}, which the archive storage no longer has; "
        "run keel archive --verify"
    )

    # No pass builds on the cut chain: the next one refuses, naming the anchored head, and purges nothing.
    (waiting,) = made.ended(people["requester"].user)
    refused = made.keel_archive(tmp_path, root, "--older-than", "0d")
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert refused.stderr.startswith(
        f"nothing purged: the archive chain was cut: the database anchored {named(newest)}"
    )
    assert Execution.objects.filter(pk=waiting.pk).exists()
    assert len(list((root / "archive").glob("*.manifest.json"))) == 2


def test_verify_names_a_middle_manifest_removed_and_a_missing_data_file_s_manifest(people, tmp_path, root):
    chain = three_manifests(people, root)
    middle, _middle_data, lost = chain[1]
    middle.unlink()

    checked = made.keel_archive(tmp_path, root, "--verify")
    assert checked.returncode == 1, (checked.stdout, checked.stderr)
    assert f"{named(middle)}: anchor: the database anchored it as manifest 2" in checked.stdout
    assert f"{named(middle)}: tombstones: 1 purged executions ({lost.ref})" in checked.stdout
    assert f"{named(chain[2][0])}: chain:" in checked.stdout  # the one after it names its predecessor

    # A data file gone while its manifest stays: named with the manifest that lists it.
    first, first_data, first_lost = chain[0]
    first_data.unlink()
    checked = made.keel_archive(tmp_path, root, "--verify")
    assert checked.returncode == 1
    assert f"archive/{first_data.name}: missing: {named(first)} lists it" in checked.stdout
    assert f"{named(first)}: tombstones: 1 purged executions ({first_lost.ref})" in checked.stdout
    shown = made.keel_archive(tmp_path, root, "--show", first_lost.ref)
    assert shown.returncode == 2 and "Traceback" not in shown.stderr, shown.stderr
    assert shown.stderr.strip() == (
        f"{first_lost.ref}'s rows were archived into archive/{first_data.name} (listed by {named(first)}), "
        "which the archive storage no longer has; run keel archive --verify"
    )


def test_a_pass_killed_before_its_purge_leaves_a_manifest_to_finish_not_a_cut(people, tmp_path, root):
    """S43's crash point with the anchor: the manifest written, its purge not committed, so
    not anchored; --verify calls it pending (its executions are whole in the database), and
    the next pass purges and anchors it."""
    made.ended(people["requester"].user, n=2)
    assert archive_run(older_than_days=0, batch=1).archived == 2
    (execution,) = made.ended(people["requester"].user)
    killed = made.keel_archive(tmp_path, root, "--older-than", "0d", RUNTIME_FAILPOINTS="retention:before_purge=crash")
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    pending = sorted((root / "archive").glob("*.manifest.json"))[-1]
    assert ArchiveAnchor.objects.count() == 2 and Execution.objects.filter(pk=execution.pk).exists()

    checked = made.keel_archive(tmp_path, root, "--verify")
    assert checked.returncode == 0, (checked.stdout, checked.stderr)
    assert f"{named(pending)}: not anchored yet" in checked.stdout

    done = made.keel_archive(tmp_path, root, "--older-than", "0d")
    assert done.returncode == 0, done.stderr
    assert "finished 1 from an interrupted pass" in done.stdout
    assert ArchiveAnchor.objects.order_by("-seq").values_list("manifest", "purged").first() == (named(pending), 1)
    assert made.keel_archive(tmp_path, root, "--verify").returncode == 0

    # A tombstone naming a manifest that never held its execution (forged, or a restore gone wrong): named.
    with psycopg.connect(made.owner_dsn(), autocommit=True) as owner:
        owner.execute(
            "INSERT INTO executions_executiontombstone (id, workflow, created_by_id, ended_at, archived_at, manifest)"
            " VALUES (999999, 'monthly_report', %s, now(), now(), %s)",
            [people["requester"].user.pk, named(pending)],
        )
    forged = made.keel_archive(tmp_path, root, "--verify")
    assert forged.returncode == 1
    assert f"{named(pending)}: tombstones: 1 purged executions (RUN_999999)" in forged.stdout


def test_the_application_role_can_t_delete_or_change_tombstones_or_anchors(people, root):
    """Deleting a tombstone would turn an archived run's 410 into a 404 and free its
    idempotency key; deleting an anchor would hide a cut chain. The application's role may
    only read and insert both, whatever it knows about the triggers."""
    body = {"workflow": "monthly_report", "input": {"month": "2026-08"}, "idempotency_key": "k-38"}
    client, bearer = Client(), {"HTTP_AUTHORIZATION": f"Bearer {people['requester'].token}"}
    started = client.post("/api/executions", body, content_type="application/json", **bearer)
    execution = Execution.objects.get(pk=int(started.json()["id"].removeprefix("RUN_")))
    from django.db import transaction

    from executions.engine import lifecycle

    with transaction.atomic():
        lifecycle.apply(execution, "cancel")
    assert archive_run(older_than_days=0).archived == 1

    db = connection.settings_dict
    app_dsn = f"postgresql://{APP_DB_ROLE}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    attempts = {
        "executions_executiontombstone": ["DELETE FROM {t}", "UPDATE {t} SET manifest = 'elsewhere'"],
        "retention_archiveanchor": ["DELETE FROM {t}", "UPDATE {t} SET sha256 = 'forged'", "TRUNCATE {t}"],
    }
    with psycopg.connect(app_dsn, autocommit=True) as app:
        for table, statements in attempts.items():
            trigger = app.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND tgname LIKE 'pgtrigger_%%'", [table]
            ).fetchone()[0]
            for statement in statements:
                for ignore in (False, True):
                    with pytest.raises(psycopg.errors.InsufficientPrivilege), app.transaction():
                        if ignore:
                            app.execute(f"SET LOCAL pgtrigger.ignore = '{{{trigger}}}'")
                        app.execute(statement.format(t=table))
    assert ExecutionTombstone.objects.filter(pk=execution.pk, manifest__startswith="archive/").exists()
    assert ArchiveAnchor.objects.count() == 1
    assert client.get(f"/api/executions/{execution.ref}", **bearer).status_code == 410
    again = client.post("/api/executions", body, content_type="application/json", **bearer)
    assert again.status_code == 410  # the key stays taken
