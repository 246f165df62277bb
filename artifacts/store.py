"""The artifact store: bytes addressed by their sha256 on the ``artifacts`` storage alias.

``put`` is idempotent (same bytes → same path, never overwritten); ``get`` verifies
the digest on the way out, so a tampered or truncated blob is an error, not content.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.core.files.base import ContentFile
from django.core.files.storage import storages


class CorruptArtifact(Exception):
    """The stored bytes no longer hash to the digest they were stored under."""


@dataclass(frozen=True)
class StoredBlob:
    path: str
    sha256: str
    size: int


def _storage():
    return storages["artifacts"]


def path_for(sha256: str) -> str:
    return f"sha256/{sha256[:2]}/{sha256}"


def put(content: bytes) -> StoredBlob:
    digest = hashlib.sha256(content).hexdigest()
    path = path_for(digest)
    storage = _storage()
    if not storage.exists(path):
        saved = storage.save(path, ContentFile(content))
        if saved != path:  # a racing writer stored the same bytes first
            storage.delete(saved)
    blob = StoredBlob(path=path, sha256=digest, size=len(content))
    if get(blob.path, expected_sha256=digest) != content:
        raise CorruptArtifact(f"{path} does not hold the bytes just written")
    return blob


def get(path: str, *, expected_sha256: str) -> bytes:
    with _storage().open(path, "rb") as handle:
        content = handle.read()
    if hashlib.sha256(content).hexdigest() != expected_sha256:
        raise CorruptArtifact(f"{path} does not match sha256 {expected_sha256}")
    return content
