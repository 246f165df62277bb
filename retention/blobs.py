"""The blob sweep (issue 23; docs/design.md §4 "Retention"): artifact contents stay in the
content-addressed store (``artifacts.store``: ``sha256/<ab>/<digest>``) while a live
version or an archive names them; a blob nothing names any more is removed.

It runs in every real archive pass, after the purge (``retention.archiver.archive_run``),
and alone (``retention.archiver.sweep_run``: ``keel archive --blobs``), through the storage API alone (the filesystem and S3 alike; on S3 the role that runs
the archive needs ``s3:DeleteObject`` on ``sha256/*``):

1. one listing of the store's keys (``sha256/`` and each of its folders);
2. the blobs the archive keeps: every manifest's ``artifact_blobs``
   (``store.archived_blobs``);
3. in one transaction under the blob lock, exclusive (``artifacts.store.lock_blobs``):
   the blobs live versions keep, one query of their sha256; then each key neither
   names, by its modified time: older than ``RUNTIME_BLOB_GRACE_HOURS`` → removed,
   younger → kept for now (a ``put`` whose version row has not committed yet).

Guarantees: a blob a live version or a manifest names is never removed, nor one stored
within the grace, nor one a version row reuses while the sweep runs (``store.pin``
takes the lock shared). Every decision is made before the first removal, so when the
listing, a manifest or a modified time can't be read, or the database refuses the
lock or the query, nothing is removed and ``failed`` says why; a removal that fails
stops the sweep there. Files straight under ``sha256/``
are not the store's and are left alone; a duplicate a lost race left beside its key
(``sha256/ab/<digest>_x1Y2z3``) is named by nothing and goes like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from artifacts import store as blob_store
from artifacts.models import ArtifactVersion

from . import store


@dataclass
class Sweep:
    """What one sweep did (``removed``: would remove, in a dry run)."""

    removed: int = 0
    kept: int = 0  # named by a live version or an archive manifest
    within_grace: int = 0  # named by nothing, stored less than the grace ago: kept for now
    failed: str | None = None  # why nothing (more) was removed

    def as_json(self, *, dry_run: bool) -> dict:
        return {
            "blobs_would_remove" if dry_run else "blobs_removed": self.removed,
            "blobs_kept": self.kept,
            "blobs_within_grace": self.within_grace,
        }


def sweep(*, dry_run: bool = False) -> Sweep:
    """Remove (or, in a dry run, count) every blob nothing names that is older than the grace."""
    storage = store.storage()
    try:
        keys = listing()
        archived = store.archived_blobs()
    except store.Unreachable as exc:
        return Sweep(failed=f"no blob removed: {exc}")
    outcome = Sweep()
    try:
        return _decide_and_remove(storage, keys, archived, outcome, dry_run=dry_run)
    except DatabaseError as exc:  # the lock or the live versions' query: the archive's work stands
        done = f"removed {outcome.removed} blobs, then" if outcome.removed and not dry_run else "no blob removed:"
        return Sweep(failed=f"{done} the database answered with an error: {str(exc).strip()}")


def _decide_and_remove(storage, keys: list[str], archived: set[str], outcome: Sweep, *, dry_run: bool) -> Sweep:
    cutoff = timezone.now() - timedelta(hours=settings.RUNTIME_BLOB_GRACE_HOURS)
    with transaction.atomic():
        if not dry_run:
            blob_store.lock_blobs(shared=False)
        live = set(ArtifactVersion.objects.order_by().values_list("sha256", flat=True).distinct())
        named = {blob_store.path_for(digest) for digest in archived | live}
        unnamed = []
        for key in keys:
            if key in named:
                outcome.kept += 1
                continue
            try:
                modified = storage.get_modified_time(key)
            except Exception as exc:
                return Sweep(
                    failed=f"no blob removed: the artifact storage could not tell when {key} was stored: {exc}"
                )
            if modified < cutoff:
                unnamed.append(key)
            else:
                outcome.within_grace += 1
        for key in unnamed:
            if not dry_run:
                try:
                    storage.delete(key)
                except Exception as exc:
                    outcome.failed = f"removed {outcome.removed} blobs, then could not remove {key}: {exc}"
                    break
            outcome.removed += 1
    return outcome


def listing() -> list[str]:
    """Every key of the store's layout, ``sha256/<folder>/<name>``; Unreachable when the storage can't be listed."""
    storage = store.storage()
    try:
        folders, _files = storage.listdir(blob_store.PREFIX)
    except FileNotFoundError:
        return []  # nothing stored yet
    except Exception as exc:
        raise store.Unreachable(f"the artifact storage could not be listed: {exc}") from exc
    keys = []
    for folder in sorted(folders):
        try:
            _dirs, files = storage.listdir(f"{blob_store.PREFIX}/{folder}")
        except Exception as exc:
            raise store.Unreachable(f"the artifact storage could not list {blob_store.PREFIX}/{folder}: {exc}") from exc
        keys.extend(f"{blob_store.PREFIX}/{folder}/{name}" for name in sorted(files))
    return keys
