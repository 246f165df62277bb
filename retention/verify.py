"""``keel archive --verify``: the archive proves itself (docs/design.md §6 "Retention").

Checks, naming the file of every failure:

* each manifest is JSON of this format and its ``body_sha256`` matches its content;
* the chain: manifests are numbered 1, 2, 3… with no gap, and each names the one before
  it with that file's sha256 (the first names none);
* each data file a manifest lists exists, hashes to its sha256, and holds the rows and
  the executions the manifest says (a missing one is named with the manifest that lists it);
* the anchor (``retention.anchor``, issue 38): every manifest the database anchored is on
  the storage and hashes to the anchored sha256, and none follows the newest anchored
  one but the one a crashed pass left to finish (``pending``: its executions are still
  in the database, none tombstoned). So removing the newest manifest, or one in the
  middle, is named even when what is left still links;
* the tombstones: every execution the database says was purged is in a data file that
  verifies, of the manifest its tombstone names;
* approval integrity, run on the archive as the metrics run it on the database: every
  archived effect an approval guarded that was sent (``executing``, ``succeeded`` or
  ``unknown``) was authorised by an archived approval request that was approved by a
  decision carrying the request's version and sha256, the artifact version it binds
  has that sha256, and the effect's arguments, where they name a sha256, carry it.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field

from executions.models import ExecutionTombstone, pk_from_ref, ref_for

from . import store
from .models import ArchiveAnchor

SENT = {"executing", "succeeded", "unknown"}


@dataclass(frozen=True)
class Finding:
    file: str
    check: str
    detail: str

    def sentence(self) -> str:
        return f"{self.file}: {self.check}: {self.detail}"


@dataclass
class Report:
    manifests: int = 0
    files: int = 0
    executions: int = 0
    guarded_effects: int = 0
    anchored: int = 0  # manifests the database anchored
    tombstones: int = 0
    pending: str | None = None  # the newest manifest, written by a pass that crashed before its purge
    findings: list[Finding] = field(default_factory=list)
    unreferenced: list[str] = field(default_factory=list)  # data files no manifest lists (a crashed pass)

    @property
    def ok(self) -> bool:
        return not self.findings

    def as_json(self) -> dict:
        return {
            "ok": self.ok,
            "manifests": self.manifests,
            "files": self.files,
            "executions": self.executions,
            "guarded_effects": self.guarded_effects,
            "anchored": self.anchored,
            "tombstones": self.tombstones,
            "pending": self.pending,
            "failures": [{"file": f.file, "check": f.check, "detail": f.detail} for f in self.findings],
            "unreferenced": self.unreferenced,
        }


def verify() -> Report:
    report = Report()
    listed: set[str] = set()
    guarded = _Guarded()
    digests: dict[str, str] = {}  # each manifest's sha256
    held: dict[str, set[int]] = {}  # per readable manifest, the executions in its data files that verify
    previous: tuple[str, str] | None = None
    for n, path in enumerate(store.manifests(), start=1):
        report.manifests += 1
        content = store.read(path)
        digest = digests[path] = store.sha256(content)
        manifest = _manifest(path, content, report)
        if manifest is not None:
            _chain(path, n, manifest, previous, report)
            proven = held[path] = set()
            for entry in manifest.get("files", []):
                listed.add(entry.get("name", ""))
                lines = _data(path, entry, report)
                if lines is not None:
                    guarded.read(entry["name"], lines)  # keeps only what the approval check needs
                    proven.update(pk_from_ref(line.get("execution") or "") for line in lines)
            report.executions += len(manifest.get("executions", []))
        previous = (path, digest)
    report.unreferenced = [p for p in store.listing() if p.endswith(store.DATA) and p not in listed]
    guarded.check(report)
    tombstoned = _tombstones(digests, held, report)
    _anchors(digests, tombstoned, report)
    return report


def _manifest(path: str, content: bytes, report: Report) -> dict | None:
    try:
        manifest = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        report.findings.append(Finding(path, "manifest", f"not valid JSON ({exc})"))
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != store.FORMAT:
        report.findings.append(Finding(path, "manifest", f"not a {store.FORMAT} manifest"))
        return None
    if manifest.get("body_sha256") != store.body_sha256(manifest):
        report.findings.append(Finding(path, "manifest sha256", "its content does not hash to its body_sha256"))
    return manifest


def _chain(path: str, n: int, manifest: dict, previous: tuple[str, str] | None, report: Report) -> None:
    if manifest.get("seq") != n:
        report.findings.append(Finding(path, "chain", f"is number {manifest.get('seq')} but is the {n}th manifest"))
    link = manifest.get("previous")
    if previous is None:
        if link is not None:
            report.findings.append(Finding(path, "chain", f"names a previous manifest {link} but is the first"))
        return
    expected = {"name": previous[0], "sha256": previous[1]}
    if link != expected:
        report.findings.append(
            Finding(path, "chain", f"names previous {link} but the manifest before it is {previous[0]} ({previous[1]})")
        )


def _data(manifest: str, entry: dict, report: Report) -> list[dict] | None:
    name = entry.get("name", "?")
    report.files += 1
    try:
        content = store.read(name)
    except FileNotFoundError:
        report.findings.append(Finding(name, "missing", f"{manifest} lists it but the storage has no such file"))
        return None
    actual = store.sha256(content)
    if actual != entry.get("sha256"):
        report.findings.append(Finding(name, "sha256", f"hashes to {actual}, the manifest says {entry.get('sha256')}"))
        return None
    try:
        lines = store.data_lines(content)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError, json.JSONDecodeError) as exc:
        report.findings.append(Finding(name, "content", f"not gzip-compressed JSON Lines ({exc})"))
        return None
    if len(lines) != entry.get("rows"):
        report.findings.append(Finding(name, "rows", f"holds {len(lines)} rows, the manifest says {entry.get('rows')}"))
    held = sorted({line.get("execution") for line in lines})
    if held != sorted(entry.get("executions", [])):
        report.findings.append(Finding(name, "executions", "holds other executions than the manifest lists"))
    return lines


def _anchors(digests: dict[str, str], tombstoned: set[str], report: Report) -> None:
    """Every anchored manifest present with its anchored sha256; after the newest anchored
    one, only a manifest a crashed pass left to finish (the newest, none of it tombstoned)."""
    anchors = list(ArchiveAnchor.objects.order_by("seq").values_list("seq", "manifest", "sha256"))
    report.anchored = len(anchors)
    for seq, path, sha256 in anchors:
        if path not in digests:
            report.findings.append(
                Finding(
                    path,
                    "anchor",
                    f"the database anchored it as manifest {seq} when its batch was purged, "
                    "but the storage has no such file: the chain was cut",
                )
            )
        elif digests[path] != sha256:
            report.findings.append(
                Finding(path, "anchor", f"hashes to {digests[path]}, the database anchored {sha256}")
            )
    head = anchors[-1][1] if anchors else None
    after = [path for path in digests if head is None or path > head]  # names sort by their number
    if len(after) == 1 and after[0] not in tombstoned:
        report.pending = after[0]  # its executions are still in the database; the next pass finishes it
    elif after and head is None:
        report.findings.append(
            Finding(
                after[-1],
                "anchor",
                "the database anchors no manifest (an archive written before the anchor existed, "
                "or its anchors are gone); the next keel archive pass anchors the newest",
            )
        )
    else:
        for path in after:
            report.findings.append(
                Finding(
                    path, "anchor", f"follows {head}, the newest manifest the database anchored, but is not anchored"
                )
            )


def _tombstones(digests: dict[str, str], held: dict[str, set[int]], report: Report) -> set[str]:
    """Every tombstone's execution in a data file that verifies, of the manifest the
    tombstone names. Returns the manifests tombstones name."""
    lost: dict[str, list[int]] = {}
    named: set[str] = set()
    rows = ExecutionTombstone.objects.order_by("pk").values_list("pk", "manifest")
    for pk, manifest in rows.iterator(chunk_size=5000):
        report.tombstones += 1
        named.add(manifest)
        if pk not in held.get(manifest, ()):
            lost.setdefault(manifest, []).append(pk)
    for manifest, pks in lost.items():
        if manifest not in digests:
            why = "the storage has no such manifest"
        elif manifest not in held:
            why = "it is not a manifest that can be read"
        else:
            why = "no data file it lists that verifies holds them"
        shown = ", ".join(ref_for(pk) for pk in pks[:5]) + (f" and {len(pks) - 5} more" if len(pks) > 5 else "")
        report.findings.append(
            Finding(manifest, "tombstones", f"{len(pks)} purged executions ({shown}) were archived into it, but {why}")
        )
    return named


class _Guarded:
    """The archive's approval requests, decisions, artifact versions and sent guarded
    effects, gathered file by file (the rest of each file is dropped once read)."""

    def __init__(self) -> None:
        self.requests: dict[int, dict] = {}
        self.decisions: dict[int, dict] = {}
        self.versions: dict[int, dict] = {}
        self.actions: list[tuple[str, dict]] = []

    def read(self, name: str, lines: list[dict]) -> None:
        for line in lines:
            model, row = line["model"], line["row"]
            if model == "approvals.approvalrequest":
                self.requests[row["id"]] = row
            elif model == "approvals.decision":
                self.decisions[row["request_id"]] = row
            elif model == "artifacts.artifactversion":
                self.versions[row["id"]] = row
            elif (
                model == "executions.action"
                and row.get("gate_ref", "").startswith("approval:")
                and row["status"] in SENT
            ):
                self.actions.append((name, row))

    def check(self, report: Report) -> None:
        for name, action in self.actions:
            report.guarded_effects += 1
            problem = _unapproved(action, self.requests, self.decisions, self.versions)
            if problem:
                report.findings.append(Finding(name, "approval integrity", f"effect {action['key']}: {problem}"))


def _unapproved(action: dict, requests: dict, decisions: dict, versions: dict) -> str:
    ref = action["gate_ref"].removeprefix("approval:")
    request = requests.get(int(ref)) if ref.isdecimal() else None
    if request is None:
        return f"its approval {action['gate_ref']} is not in the archive"
    decision = decisions.get(request["id"])
    if request["status"] != "approved" or decision is None or decision["decision"] != "approve":
        return f"approval {request['id']} was not approved"
    if (decision["artifact_version"], decision["content_sha256"]) != (request["version"], request["content_sha256"]):
        return (
            f"the decision approved V{decision['artifact_version']} ({decision['content_sha256']}) "
            f"but the request was for V{request['version']} ({request['content_sha256']})"
        )
    version = versions.get(request["artifact_version_id"])
    if version is None or version["sha256"] != request["content_sha256"]:
        return f"the artifact version approval {request['id']} binds does not hash to {request['content_sha256']}"
    carried = {action["args"].get(k) for k in ("sha256", "content_sha256") if isinstance(action.get("args"), dict)}
    carried.discard(None)
    if carried and carried != {request["content_sha256"]}:
        return f"it carried sha256 {', '.join(sorted(carried))}, not the approved {request['content_sha256']}"
    return ""
