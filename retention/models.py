"""The archive chain's anchor in the database (issue 38; docs/design.md §4 "Retention").

The manifests chain each other by sha256, but a chain kept only on the storage can lose
its head unnoticed: remove the newest manifest and its data file and what is left still
links. So each manifest is also recorded here, in the transaction that purges its batch
(``retention.archiver.purge``): a manifest is anchored exactly when the executions it
archived are gone from the database, and the newest row is where the chain must end.
Append-only: the application's role may only SELECT and INSERT it (``pgtrigger.Protect``
and ``grant_app_role``), TRUNCATE is refused to all but the owner
(``keel_refuse_truncate``), and ``created_at`` is the database's clock for every role but
the owner (``keel_stamp_created_at``).
"""

from __future__ import annotations

import pgtrigger
from django.db import models


class ArchiveAnchor(models.Model):
    """One manifest of the chain as its purge committed it: its number, its path, the
    sha256 of its bytes (as its successor links it) and how many executions that purge
    tombstoned. Never changed."""

    seq = models.PositiveBigIntegerField(primary_key=True)  # the manifest's "seq": 1, 2, 3…
    manifest = models.CharField(max_length=300, unique=True)  # archive/<name>.manifest.json
    sha256 = models.CharField(max_length=64)
    purged = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["seq"]
        triggers = [pgtrigger.Protect(name="archive_anchor_append_only", operation=pgtrigger.Update | pgtrigger.Delete)]

    def __str__(self) -> str:
        return f"{self.seq}: {self.manifest}"
