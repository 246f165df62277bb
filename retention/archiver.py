"""Archive, re-read, purge, tombstone: the one writer of the archive (docs/design.md §4 "Retention").

For each batch of whole families (``retention.policy``), in this order:

1. every row of its executions (``retention.records``) is written to the archive
   storage as one ``.jsonl.gz`` and read back, its sha256 checked;
2. the batch's manifest (``retention.store``), chained to the previous one, is written
   and read back the same way;
3. in one short transaction on the owner's connection (``DATABASE_OWNER_URL``, default
   ``DATABASE_URL``; the application role may not delete the append-only tables), the
   executions are locked, checked again (still terminal, not on hold, exactly the rows
   that were archived), deleted with every row of theirs, a tombstone written for
   each (and one per approval request: ``ApprovalTombstone``, the approval history's
   row) and the manifest anchored (``retention.anchor``: its number, path and sha256).
   A crash anywhere leaves each execution either in the database or, purged, in the
   archive, and the manifest anchored exactly when its purge committed: the
   transaction commits whole or not at all.

A crash after step 2 leaves the newest manifest unanchored, naming executions still in
the database; the next pass first finishes that purge (``finish_pending``) from the
archived file, so no execution is archived twice. Before it writes anything a pass
checks that the storage's chain ends where the database anchored it
(``anchor.pending``): a newest manifest removed or changed → ``anchor.ChainCut``, and
nothing is archived on top of the cut. One pass at a time (a PostgreSQL advisory lock);
the storage unreachable → ``store.Unreachable`` and nothing deleted.

After the last batch the pass sweeps the artifact store (``retention.blobs``): a blob
no live version and no manifest names, older than the grace, is removed. The sweep
reports in ``Outcome.blobs`` (not in ``as_json``, whose keys docs/design.md §6 fixes); when it
can't read what it needs it removes nothing and says why there (``blobs.failed``), the
archive's work standing. ``sweep_run`` runs the sweep alone, under the same lock.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

import dblocks
from approvals.models import ApprovalTombstone
from executions import runtime
from executions.models import TERMINAL, Execution, ExecutionTombstone, pk_from_ref, ref_for
from triage import tallies

from . import anchor, records, store
from .blobs import Sweep, sweep
from .policy import Member, Policy, families, on_hold

Busy = dblocks.Busy  # another archive pass holds the lock


@dataclass
class Outcome:
    archived: int = 0
    manifests: list[str] = field(default_factory=list)
    skipped_on_hold: int = 0
    recovered: int = 0  # purged from a manifest a crashed pass had written
    would_archive: int | None = None
    blobs: Sweep = field(default_factory=Sweep)

    def as_json(self, *, dry_run: bool) -> dict:
        """``keel archive --json``: exactly docs/design.md §6's keys (the blob sweep's counts are
        in the human output and the log, and in ``keel archive --blobs --json``)."""
        if dry_run:
            return {"would_archive": self.would_archive, "skipped_on_hold": self.skipped_on_hold}
        return {
            "archived": self.archived,
            "manifest": self.manifests[-1] if self.manifests else None,
            "skipped_on_hold": self.skipped_on_hold,
        }


def owner_alias() -> str:
    return "owner" if "owner" in settings.DATABASES else "default"


def archive_run(
    *,
    older_than_days: int | None = None,
    dry_run: bool = False,
    batch: int | None = None,
    max_seconds: float | None = None,
) -> Outcome:
    """One pass: finish a crashed pass's purge, archive and purge batch after batch until
    nothing is left or ``max_seconds`` have passed, then sweep the unreferenced blobs. A
    dry run counts what would be archived and sweeps nothing (``sweep_run(dry_run=True)``)."""
    policy = Policy.current(older_than_days=older_than_days)
    batch = batch or settings.RUNTIME_RETENTION_BATCH
    outcome = Outcome(skipped_on_hold=on_hold(policy))
    if dry_run:
        outcome.would_archive = sum(len(family) for family in _once(families(policy, batch=batch)))
        return outcome
    using = owner_alias()
    started = time.monotonic()
    with _one_pass(using):
        outcome.recovered = finish_pending(using=using)
        pending: list[Member] = []
        for family in _once(families(policy, batch=batch)):
            pending.extend(family)
            if len(pending) >= batch:
                _archive(pending, policy, using, outcome)
                pending = []
                if max_seconds is not None and time.monotonic() - started > max_seconds:
                    break
        if pending:
            _archive(pending, policy, using, outcome)
        if outcome.archived or outcome.recovered:  # the counts' tallies counted rows now gone
            tallies.refresh(force=True)
        outcome.blobs = sweep()
    return outcome


def sweep_run(*, dry_run: bool = False) -> Sweep:
    """The blob sweep alone (``keel archive --blobs``): no archive, no purge. A real sweep
    holds the archive pass's lock (Busy while a pass runs: one writing a manifest and
    purging its versions meanwhile could leave a blob it names looking unreferenced)."""
    if dry_run:
        return sweep(dry_run=True)
    with _one_pass(owner_alias()):
        return sweep()


def _once(found):
    """Each family once: a member with a higher id than the page it was found from comes
    up again as a candidate of a later page (before its batch is purged)."""
    seen: set[int] = set()
    for family in found:
        if family[0].pk not in seen:
            seen.update(m.pk for m in family)
            yield family


def _one_pass(using: str) -> dblocks.session:
    """The archive pass's lock on the owner's connection for the block (Busy while another runs)."""
    return dblocks.session(
        dblocks.Lock.ARCHIVE,
        connection=connections[using],
        busy="another archive pass is running; try again when it has finished",
    )


def _archive(members: list[Member], policy: Policy, using: str, outcome: Outcome) -> None:
    ids = [m.pk for m in members]
    lines = list(records.rows(ids, using=using))
    head = store.head()
    if anchor.pending(head, using=using):  # finish_pending ran first: a pending head here is not ours to build on
        raise anchor.ChainCut(f"{head.path}, the newest manifest, is not anchored in the database; nothing archived")
    seq = head.manifest["seq"] + 1 if head else 1
    name = store.new_name(seq)
    data_path = f"{store.PREFIX}/{name}{store.DATA}"
    content = store.data_bytes(lines, records.encode)
    digest = store.write(data_path, content)
    runtime.failpoint("retention:after_data")
    refs = [ref_for(pk) for pk in ids]
    manifest = {
        "format": store.FORMAT,
        "name": name,
        "seq": seq,
        "created_at": timezone.now().isoformat(),
        "policy": policy.as_json(),
        "previous": {"name": head.path, "sha256": head.sha256} if head else None,
        "files": [{"name": data_path, "sha256": digest, "size": len(content), "rows": len(lines), "executions": refs}],
        "executions": [
            {"id": ref_for(m.pk), "workflow": m.workflow, "status": m.status, "ended_at": m.ended_at.isoformat()}
            for m in members
        ],
        "artifact_blobs": sorted(
            {line["row"]["sha256"] for line in lines if line["model"] == "artifacts.artifactversion"}
        ),
    }
    manifest["body_sha256"] = store.body_sha256(manifest)
    manifest_path = f"{store.PREFIX}/{name}{store.MANIFEST}"
    sha256 = store.write(manifest_path, json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False).encode())
    runtime.failpoint("retention:before_purge")
    outcome.archived += len(purge(manifest_path, manifest, lines, sha256=sha256, using=using))
    outcome.manifests.append(manifest_path)


def finish_pending(*, using: str) -> int:
    """Purge what the newest manifest holds and is still in the database when it is not
    anchored yet (a pass that crashed between writing it and committing its purge), from
    the archived file read back and checked against the manifest, and anchor it.
    Returns how many were purged; ChainCut when the storage's chain does not end where
    the database anchored it."""
    head = store.head()
    if not anchor.pending(head, using=using):
        return 0
    lines = []
    for entry in head.manifest["files"]:
        try:
            content = store.read(entry["name"])
        except FileNotFoundError:
            raise store.Unreachable(f"{entry['name']}, listed by {head.path}, is missing; nothing purged") from None
        if store.sha256(content) != entry["sha256"]:
            raise store.Unreachable(f"{entry['name']} does not match its manifest's sha256; nothing purged")
        lines.extend(store.data_lines(content))
    return len(purge(head.path, head.manifest, lines, sha256=head.sha256, using=using))


def purge(manifest_path: str, manifest: dict, lines: list[dict], *, sha256: str, using: str) -> list[int]:
    """In one transaction: delete the executions of ``lines`` that are still terminal,
    not on hold and hold exactly the rows archived, with all their rows, tombstone them
    and anchor the manifest (``sha256``: its bytes'), even when none could go. Returns
    the pks purged (the rest stay in the database, whole)."""
    archived: dict[int, set[tuple[str, int]]] = defaultdict(set)
    heads: dict[int, dict] = {}
    for line in lines:
        pk = pk_from_ref(line["execution"])
        archived[pk].add((line["model"], line["pk"]))
        if line["model"] == "executions.execution":
            heads[pk] = line["row"]
    ids = sorted(archived)
    now = timezone.now()
    with transaction.atomic(using=using):
        locked = (
            Execution.objects.using(using).select_for_update().filter(pk__in=ids).values_list("pk", "status", "hold_at")
        )
        may_go = {pk for pk, status, hold in locked if status in TERMINAL and hold is None}
        now_rows = records.keys(ids, using=using)
        purged = [pk for pk in ids if pk in may_go and now_rows.get(pk) == archived[pk]]
        by_table: dict[str, list[int]] = defaultdict(list)
        for pk in purged:
            for label, row_pk in archived[pk]:
                by_table[label].append(row_pk)
        records.delete(by_table, using=using)
        runtime.failpoint("retention:mid_purge")
        ExecutionTombstone.objects.using(using).bulk_create(
            [
                ExecutionTombstone(
                    id=pk,
                    workflow=heads[pk]["workflow"],
                    created_by_id=heads[pk]["created_by_id"],
                    idempotency_key=heads[pk]["idempotency_key"],
                    ended_at=_when(heads[pk]["status_changed_at"]),
                    archived_at=now,
                    manifest=manifest_path,
                )
                for pk in purged
            ]
        )
        ApprovalTombstone.objects.using(using).bulk_create(_approval_tombstones(lines, set(purged), using=using))
        anchor.record(seq=manifest["seq"], manifest=manifest_path, sha256=sha256, purged=len(purged), using=using)
    return purged


def _approval_tombstones(lines: list[dict], purged: set[int], *, using: str) -> list[ApprovalTombstone]:
    """What stays of each approval request of the ``purged`` executions (issue 39 item 10):
    its row in the approval history, marked archived, and its story's pointer to the archive."""
    requests = [line for line in lines if line["model"] == "approvals.approvalrequest"]
    requests = [line for line in requests if pk_from_ref(line["execution"]) in purged]
    decisions = {line["row"]["request_id"]: line["row"] for line in lines if line["model"] == "approvals.decision"}
    user_ids = {line["row"]["requested_by_id"] for line in requests}
    user_ids |= {d["decided_by_id"] for d in decisions.values()}
    names = dict(get_user_model().objects.using(using).filter(pk__in=user_ids).values_list("pk", "username"))
    out = []
    for line in requests:
        row = line["row"]
        decision = decisions.get(row["id"])
        out.append(
            ApprovalTombstone(
                id=row["id"],
                execution_id=pk_from_ref(line["execution"]),
                action=row["action"],
                step=row["step"],
                version=row["version"],
                content_sha256=row["content_sha256"],
                status=row["status"],
                requested_by=names.get(row["requested_by_id"], ""),
                requested_at=_when(row["created_at"]),
                decision=decision["decision"] if decision else "",
                decided_by=(decision.get("decided_by_username") or names.get(decision["decided_by_id"], ""))
                if decision
                else "",
                decided_at=_when(decision["created_at"]) if decision else None,
            )
        )
    return out


def _when(value):
    return parse_datetime(value) if isinstance(value, str) else value
