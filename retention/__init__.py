"""Retention (issue 23; docs/design.md §4 "Retention", §6 "Operations"): history is kept
``RUNTIME_RETENTION_DAYS`` after an execution ends, then archived to the artifact
storage as compressed JSON Lines under a hash-chained manifest and purged by the
database's owner role; a legal hold keeps an execution whatever its age. Artifact
blobs stay while a live version or a manifest names them; each pass then removes the
ones nothing names.

Modules: ``policy`` (what may go), ``records`` (every row of an execution, found from
the models' foreign keys), ``store`` (the archive's files and manifests), ``archiver``
(archive, re-read, purge, tombstone; the one writer of the archive), ``anchor`` and
``models`` (the chain's head anchored in the database, issue 38), ``blobs`` (the
sweep of unreferenced artifact blobs; the one remover of blobs), ``verify`` (the
chain and its anchor, the hashes, the tombstones, approval integrity), ``reader`` (an
archived execution read back), ``holds`` (legal holds), ``api`` and ``tasks`` (the
edges).
"""
