"""Artifact content as HTML for the screens: Markdown rendered, raw HTML in it escaped.

``render_artifact`` is the one place that turns a version's bytes into HTML; the
execution page and the version page both use it.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import markdown
from django.utils.safestring import SafeString, mark_safe

from .models import ArtifactVersion
from .services import artifact_version_content, artifact_version_diff, previous_version
from .store import CorruptArtifact


def unavailable_message(exc: Exception) -> str:
    """What to tell a person when a version's bytes can't be shown."""
    if isinstance(exc, CorruptArtifact):
        return f"Content failed verification: {exc}. The stored blob no longer matches the version's sha256."
    if isinstance(exc, FileNotFoundError):
        return "Content missing from the artifact store."
    if isinstance(exc, UnicodeDecodeError):
        return "Binary content: not shown as text."
    return f"Content unavailable: {exc}"


def render_source(content_type: str, source: str) -> SafeString:
    """Markdown as HTML (raw HTML in the source escaped, never rendered); anything else verbatim."""
    if content_type != "text/markdown":
        return mark_safe(f"<pre>{html.escape(source)}</pre>")
    return mark_safe(markdown.markdown(html.escape(source, quote=False), extensions=["tables"]))


def render_artifact(version) -> SafeString:
    """The version's verified content as HTML, or an error paragraph (never an exception)."""
    try:
        source = artifact_version_content(version).decode()
    except Exception as exc:  # corrupt, missing or binary blob: say so, don't 500
        return mark_safe(f'<p class="error" role="alert">{html.escape(unavailable_message(exc))}</p>')
    return render_source(version.content_type, source)


@dataclass(frozen=True)
class DiffLine:
    kind: str  # file, hunk, add, del, ctx
    text: str


@dataclass(frozen=True)
class VersionDiff:
    previous: ArtifactVersion | None
    lines: list[DiffLine] = field(default_factory=list)
    error: str = ""


def _classify(line: str) -> DiffLine:
    if line.startswith(("+++", "---")):
        return DiffLine("file", line)
    if line.startswith("@@"):
        return DiffLine("hunk", line)
    if line.startswith("+"):
        return DiffLine("add", line)
    if line.startswith("-"):
        return DiffLine("del", line)
    return DiffLine("ctx", line)


def version_diff(version: ArtifactVersion) -> VersionDiff:
    """The unified diff from the previous version to ``version`` (none for a first version)."""
    older = previous_version(version)
    if older is None:
        return VersionDiff(previous=None)
    try:
        lines = artifact_version_diff(older, version)
    except Exception as exc:  # noqa: BLE001 - corrupt, missing or binary content, any storage: say so, don't 500
        return VersionDiff(previous=older, error=unavailable_message(exc))
    return VersionDiff(previous=older, lines=[_classify(line) for line in lines])
