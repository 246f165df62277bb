"""Retention's scenarios (issue 23; docs/scenarios.md S43–S45), with real ``manage.py keel
archive`` processes: the archiver SIGKILLed (by its failpoints) between writing a batch
and deleting it and in the middle of deleting; a cut-off over an execution on hold and
one with a live child; a flipped byte in the archive."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from django.test import Client

from executions.models import Execution, ExecutionEvent, ExecutionTombstone, ref_for
from retention.archiver import archive_run
from retention.verify import verify
from tests.support import retention as made


@pytest.fixture
def root(settings, tmp_path):
    return made.archive_storage(settings, tmp_path / "store")


def census(root, pks: list[int]) -> dict[str, list[int]]:
    """Where each execution is: in the database, or purged and in exactly one manifest; never neither."""
    listed = Counter()
    for path in sorted((root / "archive").glob("*.manifest.json")):
        listed.update(e["id"] for e in json.loads(path.read_text())["executions"])
    in_db = set(Execution.objects.filter(pk__in=pks).values_list("pk", flat=True))
    gone = set(ExecutionTombstone.objects.filter(pk__in=pks).values_list("pk", flat=True))
    for pk in pks:
        assert (pk in in_db) != (pk in gone), f"{ref_for(pk)}: in the database {pk in in_db}, tombstone {pk in gone}"
        if pk in gone:
            assert listed[ref_for(pk)] == 1, f"{ref_for(pk)} is in {listed[ref_for(pk)]} manifests"
            assert not ExecutionEvent.objects.filter(execution_id=pk).exists()
    return {"in_db": sorted(in_db), "archived": sorted(gone)}


def test_s43_the_archiver_killed_between_writing_and_deleting_and_mid_delete(people, tmp_path, root):
    pks = [e.pk for e in made.ended(people["requester"].user, n=5)]

    # Killed after its first batch's data and manifest are written, before the purge.
    killed = made.keel_archive(
        tmp_path, root, "--older-than", "0d", "--batch", "2", RUNTIME_FAILPOINTS="retention:before_purge=crash"
    )
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    assert len(list((root / "archive").glob("*.manifest.json"))) == 1
    assert census(root, pks) == {"in_db": pks, "archived": []}

    # Killed again in the middle of deleting (the rerun finishing that batch first).
    killed = made.keel_archive(
        tmp_path, root, "--older-than", "0d", "--batch", "2", RUNTIME_FAILPOINTS="retention:mid_purge=crash"
    )
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    assert (tmp_path / "fp" / "retention__mid_purge").exists()  # it got there
    assert census(root, pks) == {"in_db": pks, "archived": []}  # the deletes rolled back whole

    done = made.keel_archive(tmp_path, root, "--older-than", "0d", "--batch", "2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("archived 3 executions into 2 manifests"), done.stdout
    assert "finished 2 from an interrupted pass" in done.stdout
    assert census(root, pks) == {"in_db": [], "archived": pks}
    assert len(list((root / "archive").glob("*.manifest.json"))) == 3
    report = verify()
    assert report.ok and report.executions == 5, report.findings


def test_s44_an_execution_on_hold_and_one_with_a_live_child_survive_any_cutoff(people, root):
    """S44: a cut-off that covers an execution on hold and one whose child is still live →
    both survive a 0d archive pass (still answered 200), while a terminal family beside them
    is archived whole (its child answers 410)."""
    user = people["requester"].user
    held, parent, orphan_child, old_parent, old_child = made.ended(user, n=5)
    made.backdate(held, days_ago=900, hold_reason="litigation", hold_by=people["auditor"].user, hold_at=held.created_at)
    live_child = made.live(user, parent=parent, parent_step="fan_out", child_key="m1")
    live_parent = made.live(user)
    made.backdate(orphan_child, days_ago=900, parent=live_parent, parent_step="fan_out", child_key="m1")
    made.backdate(old_child, days_ago=900, parent=old_parent, parent_step="fan_out", child_key="m1")

    outcome = archive_run(older_than_days=0)

    survivors = [held, parent, live_child, orphan_child, live_parent]
    assert set(Execution.objects.values_list("pk", flat=True)) == {e.pk for e in survivors}
    assert outcome.archived == 2 and outcome.skipped_on_hold == 1  # the terminal family went, whole
    client = Client()
    for execution in survivors:
        answer = client.get(f"/api/executions/{execution.ref}", HTTP_AUTHORIZATION=f"Bearer {people['auditor'].token}")
        assert answer.status_code == 200, (execution.ref, answer.status_code)
    assert (
        client.get(
            f"/api/executions/{old_child.ref}", HTTP_AUTHORIZATION=f"Bearer {people['auditor'].token}"
        ).status_code
        == 410
    )


def test_s45_a_flipped_byte_in_an_archive_file_is_named_by_verify(people, tmp_path, root):
    made.ended(people["requester"].user, n=3)
    archive_run(older_than_days=0, batch=1)
    manifests = sorted((root / "archive").glob("*.manifest.json"))
    assert len(manifests) == 3 and verify().ok
    data = root / json.loads(manifests[0].read_text())["files"][0]["name"]
    flip(data, 40)
    flip(manifests[2], manifests[2].read_bytes().index(b'"seq"') + 8)  # the newest: no successor links to it

    checked = made.keel_archive(tmp_path, root, "--verify")
    assert checked.returncode == 1, (checked.stdout, checked.stderr)
    named = checked.stdout
    assert f"archive/{data.name}: sha256:" in named
    assert f"archive/{manifests[2].name}: manifest" in named
    assert f"archive/{manifests[1].name}" not in named  # the intact one is not blamed


def flip(path, offset: int) -> None:
    content = bytearray(path.read_bytes())
    content[offset] ^= 0x01
    path.write_bytes(bytes(content))
