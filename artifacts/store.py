"""The artifact store: bytes addressed by their sha256 on the ``artifacts`` storage alias.

Content addressing makes the invariants cheap to hold on any django-storages backend
(the filesystem by default, S3 by settings; docs/artifacts.md):

* the key is the digest (``sha256/<ab>/<digest>``), so the same bytes always land on
  the same key and a key can only ever be meant to hold one content;
* ``put`` never overwrites: a key that already exists is not written again, it is read
  back and verified, so different bytes found under a key are ``CorruptArtifact``,
  never something to replace;
* ``put`` verifies on write: after saving, what the storage holds must hash to the key;
* ``get`` verifies on the way out, so a tampered or truncated blob is an error, not
  content.

Only ``exists``, ``save`` and ``open`` are used (HEAD, PUT, GET on S3); ``delete`` only
to tidy up after a lost race, best effort. Blobs nothing references any more are
removed by retention's blob sweep (``retention.blobs``), never here; ``pin`` keeps a
blob ``put`` found already stored from going while its version row commits.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

from django.core.files.base import ContentFile
from django.core.files.storage import storages

import dblocks

log = logging.getLogger(__name__)

PREFIX = "sha256"


class CorruptArtifact(Exception):
    """The stored bytes no longer hash to the digest they were stored under."""


class MissingBlob(Exception):
    """A blob ``put`` found already stored was removed as unreferenced before its version row committed."""


@dataclass(frozen=True)
class StoredBlob:
    path: str
    sha256: str
    size: int
    reused: bool = field(default=False, compare=False)  # put found the bytes already stored


def lock_blobs(*, shared: bool) -> None:
    """Inside a transaction: take the blob lock until it ends — the blob sweep exclusive
    while it decides and removes, a version row reusing a stored blob shared while it
    commits (``pin``). PostgreSQL; the embedded SQLite default has no such lock."""
    dblocks.xact(dblocks.Lock.BLOBS, shared=shared)


def pin(blob: StoredBlob) -> None:
    """Inside the transaction that commits a version row naming ``blob``: the blob sweep
    has not removed it and won't before this transaction ends.

    A blob ``put`` wrote is new, so the sweep's grace (``RUNTIME_BLOB_GRACE_HOURS``)
    keeps it. One ``put`` found already stored may be an old unreferenced blob: this
    takes the blob lock shared (the sweep decides and removes under it exclusive, so it
    either saw this row committed or has finished) and checks the key is still there;
    if the sweep removed it meanwhile, MissingBlob: the transaction rolls back, so no row
    names missing bytes, and running the step again stores them afresh.
    """
    if not blob.reused:
        return
    lock_blobs(shared=True)
    if not _storage().exists(blob.path):
        raise MissingBlob(f"{blob.path} was removed as unreferenced before its version committed; run the step again")


def _storage():
    return storages["artifacts"]


def path_for(sha256: str) -> str:
    return f"{PREFIX}/{sha256[:2]}/{sha256}"


def put(content: bytes) -> StoredBlob:
    """Store ``content`` under its digest (at most once) and verify what the storage holds."""
    digest = hashlib.sha256(content).hexdigest()
    path = path_for(digest)
    storage = _storage()
    reused = storage.exists(path)
    if not reused:
        # Neither backend overwrites here (FileSystemStorage: O_EXCL; S3Storage:
        # file_overwrite=False): a writer that lost a race gets a renamed copy instead.
        saved = storage.save(path, ContentFile(content))
        if saved != path:
            _discard(storage, saved)
    get(path, expected_sha256=digest)  # verify on write; raises CorruptArtifact
    return StoredBlob(path=path, sha256=digest, size=len(content), reused=reused)


def get(path: str, *, expected_sha256: str) -> bytes:
    """The bytes under ``path``, only if they hash to ``expected_sha256``."""
    with _storage().open(path, "rb") as handle:
        content = handle.read()
    actual = hashlib.sha256(content).hexdigest()
    if actual != expected_sha256:
        raise CorruptArtifact(
            f"{path} does not match sha256 {expected_sha256} (holds {len(content)} bytes hashing to {actual})"
        )
    return content


def _discard(storage, name: str) -> None:
    """Drop the redundant copy a racing save left under a new name; keep it if we may not."""
    try:
        storage.delete(name)
    except Exception:  # e.g. no s3:DeleteObject: an unreferenced copy is harmless
        log.warning("artifact store: left redundant copy %s (could not delete it)", name, exc_info=True)
