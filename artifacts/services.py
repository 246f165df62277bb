"""Writes for artifacts. Callers hold the execution's fence when they create versions."""

from __future__ import annotations

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
