"""``keel archive --verify``: the archive proves itself (DESIGN §6 "Retention").

Checks, naming the file of every failure:

* each manifest is JSON of this format and its ``body_sha256`` matches its content;
* the chain: manifests are numbered 1, 2, 3… with no gap, and each names the one before
  it with that file's sha256 (the first names none);
* each data file a manifest lists exists, hashes to its sha256, and holds the rows and
  the executions the manifest says;
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

from . import store

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
            "failures": [{"file": f.file, "check": f.check, "detail": f.detail} for f in self.findings],
            "unreferenced": self.unreferenced,
        }


def verify() -> Report:
    report = Report()
    listed: set[str] = set()
    guarded = _Guarded()
    previous: tuple[str, str] | None = None
    for n, path in enumerate(store.manifests(), start=1):
        report.manifests += 1
        content = store.read(path)
        digest = store.sha256(content)
        manifest = _manifest(path, content, report)
        if manifest is not None:
            _chain(path, n, manifest, previous, report)
            for entry in manifest.get("files", []):
                listed.add(entry.get("name", ""))
                lines = _data(entry, report)
                if lines is not None:
                    guarded.read(entry["name"], lines)  # keeps only what the approval check needs
            report.executions += len(manifest.get("executions", []))
        previous = (path, digest)
    report.unreferenced = [p for p in store.listing() if p.endswith(store.DATA) and p not in listed]
    guarded.check(report)
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


def _data(entry: dict, report: Report) -> list[dict] | None:
    name = entry.get("name", "?")
    report.files += 1
    try:
        content = store.read(name)
    except FileNotFoundError:
        report.findings.append(Finding(name, "missing", "the manifest lists it but the storage has no such file"))
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
