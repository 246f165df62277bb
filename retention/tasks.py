"""Beat's daily pass (``retention.archive``, on the control queue): small batches
(``RUNTIME_RETENTION_BATCH``), each its own short transaction, for at most
``RUNTIME_RETENTION_PASS_SECONDS``, then the blob sweep; the next day goes on where it
stopped."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError

from .archiver import Busy, archive_run
from .store import Unreachable

log = logging.getLogger(__name__)


@shared_task(name="retention.archive", ignore_result=True)
def archive() -> dict:
    try:
        outcome = archive_run(max_seconds=settings.RUNTIME_RETENTION_PASS_SECONDS)
    except Busy as exc:
        log.info("retention: %s", exc)
        return {"skipped": str(exc)}
    except (Unreachable, DatabaseError) as exc:  # nothing purged; tomorrow's pass tries again
        log.error("retention: nothing purged: %s", str(exc).strip())
        return {"failed": str(exc).strip()}
    result = outcome.as_json(dry_run=False)
    log.info("retention: archived %s executions into %s manifests", outcome.archived, len(outcome.manifests))
    # The purge stands whatever the sweep met (it catches its own database errors); tomorrow's sweep tries again.
    if outcome.blobs.failed:
        log.error("retention: blob sweep: %s", outcome.blobs.failed)
    else:
        log.info(
            "retention: blob sweep: removed %s unreferenced blobs, kept %s still referenced and %s within the grace",
            outcome.blobs.removed,
            outcome.blobs.kept,
            outcome.blobs.within_grace,
        )
    return result
