"""The rollup: the record's observations, counted per minute, per hour and ever, so the
measures sum a few rows instead of reading every event (``metrics.rollup``)."""

from __future__ import annotations

from django.db import models

from access.managers import scoped


class Rollup(models.Model):
    """How many observations of ``measure`` (and the sum of their values) fell in the
    ``resolution``-long interval beginning at ``start``, for ``workflow``, in ``bucket``
    (a duration's bucket, ``metrics.histograms``; 0 for a count). Resolution 0: ever
    (``start`` is the epoch)."""

    MINUTE, HOUR, EVER = 60, 3600, 0

    resolution = models.PositiveIntegerField()
    start = models.DateTimeField()
    workflow = models.CharField(max_length=100)
    measure = models.CharField(max_length=60)
    bucket = models.IntegerField(default=0)
    n = models.BigIntegerField()
    total = models.FloatField(default=0.0)

    objects = scoped("workflow")  # access by workflow (access.managers)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["resolution", "start", "workflow", "measure", "bucket"], name="rollup_one_row_per_cell"
            )
        ]

    def __str__(self) -> str:
        return f"{self.measure}[{self.bucket}] {self.workflow} {self.start:%Y-%m-%d %H:%M}/{self.resolution}s: {self.n}"


class Folded(models.Model):
    """One row: the record before ``through`` is in the rollup; what came after is read raw."""

    through = models.DateTimeField()
    folded_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"folded through {self.through:%Y-%m-%d %H:%M}"
