"""The archive's files on the artifact storage (the ``artifacts`` alias: the filesystem
under ``$KEEL_ARTIFACTS_ROOT`` or S3), under ``archive/``:

* ``archive/<name>.jsonl.gz`` — one batch's rows, gzip-compressed JSON Lines;
* ``archive/<name>.manifest.json`` — the batch's manifest, written after its data.

``<name>`` is ``<seq, 6 digits>-<UTC time>-<random>``: manifests sort by ``seq``, and a
data file a crash left without its manifest never collides with the next one. A
manifest holds each data file's sha256, size, row count and executions, the policy,
the previous manifest's name and sha256 (the chain; null for the first), the sha256 of
the artifact blobs its versions name, and ``body_sha256``, the sha256 of its own
canonical JSON without that field (so a changed byte in the newest manifest, which no
successor links to yet, is found as well). Files are written once and never changed.
The blobs the manifests list stay in the artifact store for as long as the manifests
do (``archived_blobs``, read by the blob sweep, ``retention.blobs``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import secrets
from dataclasses import dataclass

from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.utils import timezone

PREFIX = "archive"
MANIFEST = ".manifest.json"
DATA = ".jsonl.gz"
FORMAT = "keel-archive/1"


class Unreachable(Exception):
    """The archive storage can't be written or read back: nothing is purged."""


def storage():
    return storages["artifacts"]


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def body_sha256(manifest: dict) -> str:
    return sha256(canonical({k: v for k, v in manifest.items() if k != "body_sha256"}))


def new_name(seq: int) -> str:
    return f"{seq:06d}-{timezone.now():%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def listing() -> list[str]:
    """Every file under ``archive/`` (names relative to the storage root), sorted."""
    try:
        _dirs, files = storage().listdir(PREFIX)
    except FileNotFoundError:
        return []
    except Exception as exc:
        raise Unreachable(f"the archive storage could not be listed: {exc}") from exc
    return sorted(f"{PREFIX}/{name}" for name in files)


def manifests() -> list[str]:
    return [path for path in listing() if path.endswith(MANIFEST)]


def read(path: str) -> bytes:
    """The bytes under ``path``; FileNotFoundError when there are none, Unreachable when the storage fails."""
    try:
        with storage().open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise Unreachable(f"the archive storage could not read {path}: {exc}") from exc


def write(path: str, content: bytes) -> str:
    """Write ``content`` once under ``path`` and read it back: its sha256, or Unreachable."""
    digest = sha256(content)
    try:
        saved = storage().save(path, ContentFile(content))
        if saved != path:
            raise Unreachable(f"{path} exists already on the archive storage (saved as {saved})")
        back = read(path)
    except Unreachable:
        raise
    except Exception as exc:
        raise Unreachable(f"the archive storage could not write {path}: {exc}") from exc
    if sha256(back) != digest:
        raise Unreachable(f"{path} read back does not hash to what was written ({digest})")
    return digest


@dataclass(frozen=True)
class Head:
    """The newest manifest: where the chain goes on."""

    path: str
    sha256: str
    manifest: dict


def head() -> Head | None:
    """The newest manifest, or None; Unreachable (naming it) when it is not a manifest of
    this format: the chain can't go on from it, so nothing is archived or purged."""
    paths = manifests()
    if not paths:
        return None
    path = paths[-1]
    content = read(path)
    return Head(path, sha256(content), parsed(f"{path}, the newest manifest,", content))


def parsed(named: str, content: bytes) -> dict:
    """A manifest's JSON; Unreachable (starting with ``named``) when it is not a manifest of this format."""
    try:
        manifest = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Unreachable(f"{named} is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise Unreachable(f"{named} is not a {FORMAT} manifest")
    return manifest


def archived_blobs() -> set[str]:
    """The sha256 of every artifact blob an archived version names: the union of every
    manifest's ``artifact_blobs``. Unreachable when a manifest can't be read, is not a
    manifest of this format, doesn't hash to its ``body_sha256`` or lists no blobs: then
    what the archive needs is not known."""
    blobs: set[str] = set()
    for path in manifests():
        try:
            content = read(path)
        except FileNotFoundError:
            raise Unreachable(f"{path} is listed but could not be read") from None
        manifest = parsed(path, content)
        if manifest.get("body_sha256") != body_sha256(manifest):
            raise Unreachable(f"{path} does not hash to its body_sha256")
        listed = manifest.get("artifact_blobs")
        if not isinstance(listed, list):
            raise Unreachable(f"{path} has no artifact_blobs list")
        blobs.update(listed)
    return blobs


def data_bytes(lines: list[dict], encode) -> bytes:
    text = "".join(encode(line) + "\n" for line in lines)
    return gzip.compress(text.encode(), mtime=0)


def data_lines(content: bytes) -> list[dict]:
    return [json.loads(line) for line in gzip.decompress(content).decode().splitlines() if line]
