"""Artifact content as HTML for the screens.

``render_artifact`` is the one place that turns a version's bytes into HTML; the
execution page, the approval page and the version page all use it. By content type:

- ``text/markdown``: ``artifacts.sanitize.render_markdown`` (rendered as written,
  raw HTML shown as text, sanitised by nh3, no off-site images);
- JSON (``application/json``, ``…+json``): a readable summary from the artifact
  kind's presenter (``artifacts.presenters``), with the exact stored bytes and their
  sha256 a click away;
- anything else: the text verbatim in ``<pre>``, escaped.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field

from django.template.loader import render_to_string
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from . import presenters
from .models import ArtifactVersion
from .sanitize import render_markdown
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


def is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def render_source(
    *, content_type: str, source: str, kind: str = "", sha256: str = "", number: int | None = None
) -> SafeString:
    """``source`` (the decoded bytes) as HTML for its content type; never raises on odd content."""
    if content_type.split(";", 1)[0].strip().lower() == "text/markdown":
        return render_markdown(source)
    if is_json(content_type):
        try:
            data = json.loads(source)
        except ValueError as exc:
            summary, error = None, f"Not valid JSON ({exc}): shown as stored."
        else:
            summary, error = presenters.summary_for(kind, data), ""
        return render_to_string(
            "artifacts/_json.html",
            {"summary": summary, "error": error, "source": source, "sha256": sha256, "number": number},
        )
    return format_html("<pre>{}</pre>", source)


def render_artifact(version: ArtifactVersion) -> SafeString:
    """The version's verified content as HTML, or an error paragraph (never an exception)."""
    try:
        source = artifact_version_content(version).decode()
    except Exception as exc:  # corrupt, missing or binary blob: say so, don't 500
        return format_html('<p class="error" role="alert">{}</p>', unavailable_message(exc))
    return render_source(
        content_type=version.content_type,
        source=source,
        kind=version.artifact.kind,
        sha256=version.sha256,
        number=version.number,
    )


@dataclass(frozen=True)
class DiffLine:
    """One line of a unified diff. ``words``: for a changed line paired with its
    counterpart (a removed line and the added line that replaced it), the line in pieces
    ``(mark, text)``, ``mark`` ``"del"`` or ``"ins"`` for the words that changed, ``""``
    for the rest; empty for any other line."""

    kind: str  # file, hunk, add, del, ctx
    text: str
    words: tuple[tuple[str, str], ...] = ()

    @property
    def html(self) -> SafeString:
        """The line as HTML, every piece escaped; changed words in ``<del>``/``<ins>``
        (not colour alone: a screen reader and a print say them too)."""
        if not self.words:
            return format_html("{}", self.text)
        return format_html_join("", "{}", ((_piece(mark, text),) for mark, text in self.words))


def _piece(mark: str, text: str) -> SafeString:
    if mark == "del":
        return format_html('<del class="diff-word">{}</del>', text)
    if mark == "ins":
        return format_html('<ins class="diff-word">{}</ins>', text)
    return format_html("{}", text)


_TOKENS = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)
MAX_WORD_DIFF_CHARS = 2000  # longer lines are marked as whole lines, not word by word


def _word_pair(removed: DiffLine, added: DiffLine) -> tuple[DiffLine, DiffLine]:
    """``removed`` and ``added`` with the words that differ between them marked (difflib
    on words, spaces and punctuation, after the one-character ``-``/``+`` prefix)."""
    if max(len(removed.text), len(added.text)) > MAX_WORD_DIFF_CHARS:
        return removed, added
    old, new = _TOKENS.findall(removed.text[1:]), _TOKENS.findall(added.text[1:])
    was: list[tuple[str, str]] = [("", "-")]
    now: list[tuple[str, str]] = [("", "+")]
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "equal":
            was.append(("", "".join(old[i1:i2])))
            now.append(("", "".join(new[j1:j2])))
            continue
        if i2 > i1:
            was.append(("del", "".join(old[i1:i2])))
        if j2 > j1:
            now.append(("ins", "".join(new[j1:j2])))
    return DiffLine(removed.kind, removed.text, tuple(was)), DiffLine(added.kind, added.text, tuple(now))


def with_words(lines: list[DiffLine]) -> list[DiffLine]:
    """``lines`` with word-level marks: each run of removed lines followed by a run of
    added lines is paired line by line (the first removed with the first added, …);
    lines left without a counterpart stay whole."""
    out: list[DiffLine] = []
    i = 0
    while i < len(lines):
        if lines[i].kind != "del":
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].kind == "del":
            j += 1
        k = j
        while k < len(lines) and lines[k].kind == "add":
            k += 1
        removed, added = lines[i:j], lines[j:k]
        pairs = [_word_pair(r, a) for r, a in zip(removed, added, strict=False)]
        out += [r for r, _ in pairs] + removed[len(pairs) :]
        out += [a for _, a in pairs] + added[len(pairs) :]
        i = k
    return out


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
    except Exception as exc:  # corrupt, missing or binary content, any storage: say so, don't 500
        return VersionDiff(previous=older, error=unavailable_message(exc))
    return VersionDiff(previous=older, lines=with_words([_classify(line) for line in lines]))
