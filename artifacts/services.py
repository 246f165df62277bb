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
) -> ArtifactVersion:
    """Add the next version of the execution's ``kind`` artifact (creating the artifact).

    Assumes an open transaction in which the caller owns the execution.
    """
    assert transaction.get_connection().in_atomic_block
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
    )


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
