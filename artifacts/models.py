"""Artifacts: a logical document (``REPORT_001``) and its immutable, hashed versions."""

from __future__ import annotations

import pgtrigger
from django.db import models

from access.managers import scoped


class Artifact(models.Model):
    kind = models.CharField(max_length=40)
    title = models.CharField(max_length=200)
    execution = models.ForeignKey("executions.Execution", on_delete=models.PROTECT, related_name="artifacts")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = scoped("execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.ref

    @property
    def ref(self) -> str:
        return f"{self.kind.upper()}_{self.pk:03d}"


class ArtifactVersion(models.Model):
    """One version's bytes live in the artifact store under their sha256; never rewritten."""

    artifact = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    content_type = models.CharField(max_length=100)
    storage_path = models.CharField(max_length=300)
    produced_by_step = models.CharField(max_length=100)
    # The round its producing step's visit ran in (executions.visits tells a loop's passes
    # apart by it); 0: copied by a restart from the execution it continues; null: stored
    # before it was kept.
    produced_in_round = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = scoped("artifact__execution__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["artifact_id", "number"]
        constraints = [models.UniqueConstraint(fields=["artifact", "number"], name="artifact_version_number_unique")]
        triggers = [pgtrigger.Protect(name="artifact_version_immutable", operation=pgtrigger.Update | pgtrigger.Delete)]

    def __str__(self) -> str:
        return f"{self.artifact.ref} V{self.number}"

    def as_ref(self) -> dict:
        """The reference execution state keeps instead of the content."""
        return {
            "artifact_id": self.artifact.ref,
            "artifact_pk": self.artifact_id,
            "version": self.number,
            "version_pk": self.pk,
            "sha256": self.sha256,
        }
