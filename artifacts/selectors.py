"""Reads for artifacts: finding a version by the references people and the API use."""

from __future__ import annotations

from .models import Artifact, ArtifactVersion

MAX_VERSION = 2**31 - 1  # PositiveIntegerField; anything larger can't exist


def artifact_for(*, artifact_ref: str) -> Artifact | None:
    """``REPORT_001`` (kind, then the primary key) → the artifact; anything else → None."""
    kind, sep, digits = artifact_ref.rpartition("_")
    if not (sep and kind and digits.isascii() and digits.isdecimal() and len(digits) <= 18):
        return None
    artifact = Artifact.objects.select_related("execution").filter(pk=int(digits)).first()
    if artifact is None or artifact.kind.upper() != kind.upper():
        return None
    return artifact


def version_for(*, artifact_ref: str, number: int) -> ArtifactVersion | None:
    artifact = artifact_for(artifact_ref=artifact_ref)
    if artifact is None or not 1 <= number <= MAX_VERSION:
        return None
    version = artifact.versions.filter(number=number).first()
    if version is not None:
        version.artifact = artifact
    return version
