"""Writes for artifacts. Callers hold the execution's fence when they create versions."""

from __future__ import annotations

import difflib

from django.db import transaction
from django.db.models import Max

from . import store
from .models import Artifact, ArtifactVersion


def artifact_version_create(
    *,
    execution,
    kind: str,
    title: str,
    blob: store.StoredBlob,
    content_type: str,
    step: str,
    round: int | None = None,
) -> ArtifactVersion:
    """Add the next version of the execution's ``kind`` artifact (creating the artifact).

    Assumes an open transaction in which the caller owns the execution. The blob is
    pinned (``store.pin``) so the blob sweep can't remove it under the new row.
    """
    assert transaction.get_connection().in_atomic_block
    store.pin(blob)
    artifact, _ = Artifact.objects.get_or_create(execution=execution, kind=kind, defaults={"title": title})
    last = artifact.versions.aggregate(n=Max("number"))["n"] or 0
    return ArtifactVersion.objects.create(
        artifact=artifact,
        number=last + 1,
        sha256=blob.sha256,
        size=blob.size,
        content_type=content_type,
        storage_path=blob.path,
        produced_by_step=step,
        produced_in_round=round,
    )


def artifact_copy(version: ArtifactVersion, *, execution) -> ArtifactVersion:
    """Give ``execution`` its own copy of ``version``'s artifact, versions 1 … ``version``
    with their numbers, hashes and producing steps, over the same stored bytes (nothing
    is rewritten: the store is content-addressed). Returns the copy of ``version``.

    For a restart (triage.restart): the new execution reuses what the failed one
    produced. Assumes an open transaction.
    """
    assert transaction.get_connection().in_atomic_block
    source = version.artifact
    artifact = Artifact.objects.create(execution=execution, kind=source.kind, title=source.title)
    copied = None
    for old in source.versions.filter(number__lte=version.number).order_by("number"):
        copied = ArtifactVersion.objects.create(
            artifact=artifact,
            number=old.number,
            sha256=old.sha256,
            size=old.size,
            content_type=old.content_type,
            storage_path=old.storage_path,
            produced_by_step=old.produced_by_step,
            produced_in_round=0,  # carried over: made before this execution's first round
        )
    return copied


def artifact_version_content(version: ArtifactVersion) -> bytes:
    return store.get(version.storage_path, expected_sha256=version.sha256)


def previous_version(version: ArtifactVersion) -> ArtifactVersion | None:
    return (
        ArtifactVersion.objects.filter(artifact=version.artifact, number__lt=version.number).order_by("-number").first()
    )


def artifact_version_diff(older: ArtifactVersion | None, newer: ArtifactVersion) -> list[str]:
    """Unified diff lines from ``older`` (or nothing) to ``newer``, both digest-verified."""
    before = artifact_version_content(older).decode().splitlines() if older else []
    after = artifact_version_content(newer).decode().splitlines()
    return list(
        difflib.unified_diff(
            before,
            after,
            fromfile=f"V{older.number}" if older else "(nothing)",
            tofile=f"V{newer.number}",
            lineterm="",
        )
    )
