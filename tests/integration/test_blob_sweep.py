"""The blob sweep (issue 23): after each archive pass, a blob in the artifact store that no
live version and no archive manifest names, stored longer ago than
``RUNTIME_BLOB_GRACE_HOURS``, is removed; everything else stays. On the filesystem
storage, a blob made "old" by setting its modified time."""

from __future__ import annotations

import io
import json
import os
import threading
import time

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from artifacts import store
from artifacts.models import ArtifactVersion
from artifacts.services import artifact_version_create
from executions.models import Execution
from retention import blobs
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
    assert outcome.as_json(dry_run=False)["blobs_removed"] == 1


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


def test_dry_run_removes_nothing_and_reports_what_would_go(people, root):
    orphan = stored(root, b"nobody's", hours_ago=48)
    version(made.live(people["requester"].user), stored(root, b"somebody's", hours_ago=48))
    stored(root, b"not yet anybody's", hours_ago=1)

    answer, human = io.StringIO(), io.StringIO()
    call_command("keel", "archive", "--dry-run", "--json", stdout=answer)
    call_command("keel", "archive", "--dry-run", stdout=human)

    assert json.loads(answer.getvalue()) == {
        "would_archive": 0,
        "skipped_on_hold": 0,
        "blobs_would_remove": 1,
        "blobs_kept": 1,
        "blobs_within_grace": 1,
        "blobs_failed": None,
    }
    assert (
        "would remove 1 artifact blobs nothing references; 1 still referenced "
        "and 1 stored within the last 24 hours stay" in human.getvalue()
    )
    assert (root / orphan.path).exists()


def test_unreadable_storage_removes_nothing_and_exits_1_with_a_sentence(people, tmp_path, root):
    (ended,) = made.ended(people["requester"].user)
    orphan = stored(root, b"nobody's", hours_ago=48)
    (root / "sha256" / "zz").symlink_to("zz")  # a folder the storage can't list: a symlink loop

    run = made.keel_archive(tmp_path, root, "--older-than", "0d")

    assert run.returncode == 1, (run.stdout, run.stderr)
    assert "archived 1 executions" in run.stderr  # the archive's work stands
    assert "no blob removed: the artifact storage could not be listed" in run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert (root / orphan.path).exists()
    assert not Execution.objects.filter(pk=ended.pk).exists()


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
