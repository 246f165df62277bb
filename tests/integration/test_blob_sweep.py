"""The blob sweep (issue 23): after each archive pass, a blob in the artifact store that no
live version and no archive manifest names, stored longer ago than
``RUNTIME_BLOB_GRACE_HOURS``, is removed; everything else stays. On the filesystem
storage, a blob made "old" by setting its modified time."""

from __future__ import annotations

import io
import json
import logging
import os
import threading
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction

import dblocks
from artifacts import store
from artifacts.models import ArtifactVersion
from artifacts.services import artifact_version_create
from executions.models import Execution
from retention import blobs, tasks
from retention.archiver import archive_run
from retention.blobs import Sweep
from tests.support import retention as made


@pytest.fixture
def root(settings, tmp_path):
    return made.archive_storage(settings, tmp_path / "store")


def stored(root, content: bytes, *, hours_ago: float) -> store.StoredBlob:
    """``content`` put in the store, its modified time ``hours_ago`` hours back."""
    blob = store.put(content)
    when = time.time() - hours_ago * 3600
    os.utime(root / blob.path, (when, when))
    return blob


def version(execution: Execution, blob: store.StoredBlob) -> ArtifactVersion:
    with transaction.atomic():
        return artifact_version_create(
            execution=execution, kind="report", title="Report", blob=blob, content_type="text/markdown", step="draft"
        )


def test_an_unreferenced_blob_older_than_the_grace_is_removed(db, root):
    orphan = stored(root, b"a draft whose step never committed", hours_ago=25)

    outcome = archive_run()

    assert outcome.blobs == Sweep(removed=1)
    assert not (root / orphan.path).exists()


def test_an_unreferenced_blob_within_the_grace_is_kept(db, root):
    recent = stored(root, b"a draft whose version row has not committed yet", hours_ago=23)

    outcome = archive_run()

    assert outcome.blobs == Sweep(within_grace=1)
    assert (root / recent.path).exists()


def test_a_blob_a_live_version_references_is_kept_however_old(people, root):
    running = made.live(people["requester"].user)
    old = stored(root, b"version 1 of a live execution's report", hours_ago=24 * 400)
    version(running, old)

    outcome = archive_run(older_than_days=0)

    assert outcome.blobs == Sweep(kept=1)
    assert store.get(old.path, expected_sha256=old.sha256)


def test_a_blob_only_an_archive_manifest_references_is_kept_after_the_purge(people, root):
    (ended,) = made.ended(people["requester"].user)
    approved = stored(root, b"the report a manager approved", hours_ago=24 * 400)
    version(ended, approved)

    outcome = archive_run(older_than_days=0)

    assert outcome.archived == 1 and not ArtifactVersion.objects.exists()  # no live row names it now
    manifest = json.loads((root / outcome.manifests[0]).read_text())
    assert manifest["artifact_blobs"] == [approved.sha256]
    assert outcome.blobs == Sweep(kept=1)
    assert archive_run().blobs == Sweep(kept=1)  # and on every later pass
    assert store.get(approved.path, expected_sha256=approved.sha256)


def keel(*args: str) -> str:
    out = io.StringIO()
    call_command("keel", "archive", *args, stdout=out)
    return out.getvalue()


def test_blobs_dry_run_removes_nothing_and_reports_what_would_go(people, root):
    orphan = stored(root, b"nobody's", hours_ago=48)
    version(made.live(people["requester"].user), stored(root, b"somebody's", hours_ago=48))
    stored(root, b"not yet anybody's", hours_ago=1)

    answer = json.loads(keel("--blobs", "--dry-run", "--json"))
    human = keel("--blobs", "--dry-run")

    assert answer == {"blobs_would_remove": 1, "blobs_kept": 1, "blobs_within_grace": 1}
    assert human.strip() == (
        "would remove 1 artifact blobs nothing references; 1 still referenced and 1 stored within the last 24 hours stay"
    )
    assert (root / orphan.path).exists()


def test_blobs_runs_only_the_sweep_no_archive_no_purge(people, root):
    (ended,) = made.ended(people["requester"].user, days_ago=400)  # past any cut-off
    orphan = stored(root, b"nobody's", hours_ago=48)
    stored(root, b"not yet anybody's", hours_ago=1)

    answer = json.loads(keel("--blobs", "--json"))

    assert answer == {"blobs_removed": 1, "blobs_kept": 0, "blobs_within_grace": 1}
    assert not (root / orphan.path).exists()
    assert Execution.objects.filter(pk=ended.pk).exists()  # not archived, not purged
    assert not (root / "archive").exists()
    assert "removed 0 artifact blobs nothing references; 0 still referenced and 1" in keel("--blobs")


@pytest.mark.parametrize(
    "other", [["--verify"], ["--show", "RUN_1"], ["--older-than", "0d"], ["--batch", "5"]], ids=lambda o: o[0]
)
def test_blobs_with_an_option_of_another_mode_is_refused_with_exit_2(db, root, other):
    orphan = stored(root, b"nobody's", hours_ago=48)

    with pytest.raises(CommandError) as refused:
        keel("--blobs", *other)

    assert refused.value.returncode == 2
    assert str(refused.value) == f"--blobs runs only the blob sweep; it can't be combined with {other[0]}"
    assert (root / orphan.path).exists()


def test_archive_json_carries_exactly_the_design_keys_while_the_pass_still_sweeps(people, root):
    made.ended(people["requester"].user)
    orphan = stored(root, b"nobody's", hours_ago=48)

    dry = json.loads(keel("--dry-run", "--json"))
    assert set(dry) == {"would_archive", "skipped_on_hold"}  # docs/design.md §6, exactly
    assert dry == {"would_archive": 1, "skipped_on_hold": 0}
    assert "would archive 1 executions" in keel("--dry-run")
    assert (root / orphan.path).exists()  # a dry run sweeps nothing

    done = json.loads(keel("--older-than", "0d", "--json"))
    assert set(done) == {"archived", "manifest", "skipped_on_hold"}  # docs/design.md §6, exactly
    assert done["archived"] == 1 and done["skipped_on_hold"] == 0
    assert done["manifest"].startswith("archive/000001-") and done["manifest"].endswith(".manifest.json")
    assert not (root / orphan.path).exists()  # the sweep ran after the purge

    again = stored(root, b"nobody's again", hours_ago=48)
    human = keel().splitlines()
    assert human[0].startswith("archived 0 executions into 0 manifests; 0 kept by a legal hold")
    assert human[1] == (
        "removed 1 artifact blobs nothing references; 0 still referenced and 0 stored within the last 24 hours stay"
    )
    assert not (root / again.path).exists()


def test_unreadable_storage_removes_nothing_and_exits_1_with_a_sentence(people, tmp_path, root):
    made.ended(people["requester"].user, n=2)
    orphan = stored(root, b"nobody's", hours_ago=48)
    (root / "sha256" / "zz").symlink_to("zz")  # a folder the storage can't list: a symlink loop

    run = made.keel_archive(tmp_path, root, "--older-than", "0d", "--batch", "1")

    assert run.returncode == 1, (run.stdout, run.stderr)
    assert run.stdout.startswith("archived 2 executions into 2 manifests")  # the pass's answer, printed
    assert "artifact blobs" not in run.stdout
    assert run.stderr.startswith("the blob sweep after the pass stopped: no blob removed: ")
    assert "the artifact storage could not be listed" in run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert (root / orphan.path).exists()
    assert not Execution.objects.exists()

    made.ended(people["requester"].user)
    as_json = made.keel_archive(tmp_path, root, "--older-than", "0d", "--json")
    assert as_json.returncode == 1, (as_json.stdout, as_json.stderr)
    assert set(json.loads(as_json.stdout)) == {"archived", "manifest", "skipped_on_hold"}
    assert json.loads(as_json.stdout)["archived"] == 1
    assert "no blob removed" in as_json.stderr and len(as_json.stderr.strip().splitlines()) == 1

    alone = made.keel_archive(tmp_path, root, "--blobs", "--json")
    assert alone.returncode == 1 and alone.stdout == "", (alone.stdout, alone.stderr)
    assert alone.stderr.startswith("the blob sweep stopped: no blob removed: the artifact storage could not be listed")
    assert "Traceback" not in alone.stderr and len(alone.stderr.strip().splitlines()) == 1
    assert (root / orphan.path).exists()


def test_blobs_while_an_archive_pass_runs_removes_nothing(db, root):
    orphan = stored(root, b"nobody's", hours_ago=48)
    other = connection.copy()  # another session holds the archive pass's lock
    try:
        with dblocks.session(dblocks.Lock.ARCHIVE, connection=other), pytest.raises(CommandError) as busy:
            keel("--blobs")
    finally:
        other.close()

    assert busy.value.returncode == 1
    assert str(busy.value) == "no blob removed: another archive pass is running; try again when it has finished"
    assert (root / orphan.path).exists()


def test_the_daily_pass_purges_and_logs_the_sweep_whose_query_failed_not_nothing_purged(
    people, root, monkeypatch, caplog
):
    (ended,) = made.ended(people["requester"].user, days_ago=400)
    orphan = stored(root, b"nobody's", hours_ago=48)

    def lock_then_fail(*, shared: bool) -> None:  # the sweep's lock taken, then its query refused
        with connection.cursor() as cursor:
            cursor.execute("SELECT no_such_column FROM artifacts_artifactversion")

    monkeypatch.setattr(store, "lock_blobs", lock_then_fail)
    with caplog.at_level(logging.INFO, logger="retention.tasks"):
        result = tasks.archive()

    assert set(result) == {"archived", "manifest", "skipped_on_hold"} and result["archived"] == 1
    assert not Execution.objects.filter(pk=ended.pk).exists()  # the purge stands
    messages = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "retention.tasks"]
    assert not any("nothing purged" in text for _level, text in messages), messages
    assert ("INFO", "retention: archived 1 executions into 1 manifests") in messages
    (error,) = [text for level, text in messages if level == "ERROR"]
    assert error.startswith("retention: blob sweep: no blob removed: the database answered with an error: ")
    assert "no_such_column" in error
    assert (root / orphan.path).exists()


def test_the_daily_pass_logs_the_sweeps_counts(people, root, caplog):
    made.ended(people["requester"].user, days_ago=400)
    stored(root, b"nobody's", hours_ago=48)

    with caplog.at_level(logging.INFO, logger="retention.tasks"):
        tasks.archive()

    messages = [r.getMessage() for r in caplog.records if r.name == "retention.tasks"]
    assert (
        "retention: blob sweep: removed 1 unreferenced blobs, kept 0 still referenced and 0 within the grace"
        in messages
    ), messages


def test_a_manifest_that_does_not_hash_to_its_body_removes_nothing(people, root):
    made.ended(people["requester"].user, n=2)
    first, _second = archive_run(older_than_days=0, batch=1).manifests
    manifest = root / first
    manifest.write_text(manifest.read_text().replace('"artifact_blobs": []', '"artifact_blobs": ["0"]'))
    orphan = stored(root, b"nobody's", hours_ago=48)

    outcome = archive_run()

    assert outcome.blobs == Sweep(failed=f"no blob removed: {first} does not hash to its body_sha256")
    assert (root / orphan.path).exists()


def test_a_reused_blob_the_sweep_removed_is_never_committed_under_a_version(people, root):
    running = made.live(people["requester"].user)
    stored(root, b"the same bytes again", hours_ago=48)
    again = store.put(b"the same bytes again")  # a step storing them again: put finds them stored
    assert again.reused

    assert archive_run().blobs == Sweep(removed=1)  # nothing named them yet

    with pytest.raises(store.MissingBlob):
        version(running, again)
    assert not ArtifactVersion.objects.exists()  # the step fails and runs again; no row without bytes


def test_a_version_committing_on_a_reused_blob_holds_the_sweep_until_it_commits(people, root):
    running = made.live(people["requester"].user)
    stored(root, b"the same bytes again", hours_ago=48)
    again = store.put(b"the same bytes again")
    pinned, release, swept = threading.Event(), threading.Event(), []

    def commit_version() -> None:
        try:
            with transaction.atomic():
                version(running, again)  # pins the blob: the blob lock, shared
                pinned.set()
                release.wait(30)
        finally:
            connection.close()

    def sweep() -> None:
        try:
            swept.append(blobs.sweep())
        finally:
            connection.close()

    writer = threading.Thread(target=commit_version)
    writer.start()
    assert pinned.wait(30)
    sweeper = threading.Thread(target=sweep)
    sweeper.start()
    sweeper.join(1.0)
    assert sweeper.is_alive()  # waiting for the version's transaction
    release.set()
    writer.join(30)
    sweeper.join(30)

    assert swept == [Sweep(kept=1)]  # it saw the committed row
    assert store.get(again.path, expected_sha256=again.sha256)
