"""An archived execution read back from the archive (``keel archive --show ID``): its
row, events, ledger and approvals, so "who approved what, when" is answered after the
purge. The manifest is the one its tombstone names, else the newest that lists it; the
data file is checked against the manifest's sha256 before it is read. A manifest or
data file that the storage no longer has is a NotFound naming it (``keel archive
--show``: one sentence, exit 2), never an exception of the storage's."""

from __future__ import annotations

from collections import defaultdict

from access import viewer
from executions.errors import Conflict, NotFound
from executions.models import ExecutionTombstone, pk_from_ref, ref_for

from . import store


def archived_execution(ref: str) -> dict:
    pk = pk_from_ref(ref)
    if pk is None:
        raise NotFound(f"no execution {ref}")
    ref = ref_for(pk)
    tombstone = ExecutionTombstone.objects.filter(pk=pk).first()
    hidden = viewer.hidden_now()
    if tombstone is None and hidden and ExecutionTombstone._base_manager.filter(pk=pk, workflow__in=hidden).exists():
        raise NotFound(f"{ref} is not in the archive")  # as for one never archived: before any file is read
    path = tombstone.manifest if tombstone else _manifest_listing(ref)
    if path is None:
        raise NotFound(f"{ref} is not in the archive")
    manifest = store.parsed(path, _read(path, f"{ref} was archived into {path}"))
    rows: dict[str, list[dict]] = defaultdict(list)
    for entry in manifest["files"]:
        if ref not in entry["executions"]:
            continue
        content = _read(entry["name"], f"{ref}'s rows were archived into {entry['name']} (listed by {path})")
        if store.sha256(content) != entry["sha256"]:
            raise Conflict(f"{entry['name']} does not match its manifest's sha256; run keel archive --verify")
        for line in store.data_lines(content):
            if line["execution"] == ref:
                rows[line["model"]].append(line["row"])
    (execution,) = rows["executions.execution"] or [None]
    if execution is None:
        raise NotFound(f"{ref} is not in {path}")
    if execution.get("workflow") in hidden:  # one without a tombstone: as absent as one never archived
        raise NotFound(f"{ref} is not in the archive")
    decisions = {d["request_id"]: d for d in rows["approvals.decision"]}
    return {
        "id": ref,
        "manifest": path,
        "archived_at": tombstone.archived_at.isoformat() if tombstone else None,
        "execution": execution,
        "events": rows["executions.executionevent"],
        "actions": rows["executions.action"],
        "approvals": [
            {
                "id": r["id"],
                "action": r["action"],
                "artifact_version": r["version"],
                "content_sha256": r["content_sha256"],
                "status": r["status"],
                "decision": decisions.get(r["id"]),
            }
            for r in rows["approvals.approvalrequest"]
        ],
        "audit": rows["approvals.auditentry"],
        "artifact_versions": rows["artifacts.artifactversion"],
        "step_runs": len(rows["executions.steprun"]),
        "model_calls": len(rows["executions.modelcall"]),
    }


def lines_for_people(record: dict) -> list[str]:
    execution = record["execution"]
    lines = [
        f"{record['id']} {execution['workflow']} v{execution['workflow_version']} {execution['status']} "
        f"(archived in {record['manifest']})",
        "events:",
    ]
    for event in record["events"]:
        moved = f" {event['from_status']} → {event['to_status']}" if event["to_status"] else ""
        who = f" by {event['actor_label']}" if event["actor_label"] else ""
        lines.append(f"  {event['created_at']} {event['type']}{moved} {event['step']}{who}".rstrip())
    lines.append("ledger:")
    lines += [f"  {a['key']} {a['type']} {a['status']} (attempts {a['attempts']})" for a in record["actions"]]
    lines.append("approvals:")
    for approval in record["approvals"]:
        decision = approval["decision"]
        decided = (
            f" — {decision['decision']} by {decision['decided_by_username'] or decision['decided_by_id']} "
            f"at {decision['created_at']} (V{decision['artifact_version']} {decision['content_sha256']})"
            if decision
            else ""
        )
        lines.append(
            f"  approval {approval['id']} {approval['action']} V{approval['artifact_version']} "
            f"{approval['content_sha256']} {approval['status']}{decided}"
        )
    return lines


def _read(path: str, what: str) -> bytes:
    try:
        return store.read(path)
    except FileNotFoundError:
        raise NotFound(f"{what}, which the archive storage no longer has; run keel archive --verify") from None


def _manifest_listing(ref: str) -> str | None:
    for path in reversed(store.manifests()):
        manifest = store.parsed(path, store.read(path))
        if any(e["id"] == ref for e in manifest.get("executions", [])):
            return path
    return None
