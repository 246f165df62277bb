"""Artifact content as HTML for the screens: Markdown rendered, raw HTML in it escaped.

``render_artifact`` is the one place that turns a version's bytes into HTML; the
execution page and the version page both use it.
"""

from __future__ import annotations

import html

import markdown
from django.utils.safestring import SafeString, mark_safe

from .services import artifact_version_content
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

