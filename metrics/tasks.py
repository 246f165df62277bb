"""The rollup's periodic task: beat sends it beside the sweeper (config.celery)."""

from __future__ import annotations

from celery import shared_task

from . import rollup


@shared_task(name="metrics.fold", ignore_result=True)
def fold() -> int:
    """Fold the closed minutes into the rollup (a few passes at most, then the next beat)."""
    return rollup.fold_all(passes=8)
