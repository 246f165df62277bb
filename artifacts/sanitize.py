"""Markdown from people and models, made safe to show to someone who can approve.

``render_markdown`` is the one way artifact or user-provided Markdown becomes HTML.
It guarantees, whatever the source:

- the Markdown is rendered as written: no escaping before rendering, so a code span
  `` `a < b` `` shows ``a < b``;
- raw HTML in the source never becomes markup: it is shown as text (``<script>``
  appears as the characters ``<script>``);
- the HTML is then sanitised by nh3 (``sanitize_html``): only the tags and attributes
  below survive, URLs only with the schemes http, https and mailto (``javascript:``
  and ``data:`` are removed), every link gets ``rel="noopener noreferrer nofollow"``;
- a link with any other scheme is not a link: its text stays, followed by a note
  "[link removed: javascript:…]", so the approver sees what was attempted;
- a protocol-relative link (``//host/…``, or ``/\\host/…`` as browsers read it) is an
  absolute link to another host and follows their rule: written out as ``https://host/…``,
  so what it points at is what it says;
- images are loaded only from the artifact store's own paths (``/artifacts/<ref>/v<n>/raw``):
  any other image — another host, ``//host``, ``data:``, and any other path of this site
  (``/approvals/12/``: a page a GET must never act on for the reader) — is not loaded but
  shown as a note naming its alt text and its address as plain text, so the approver
  sees it was there.
"""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as etree

import markdown
import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown.extensions.tables import TableExtension
from markdown.treeprocessors import Treeprocessor

ALLOWED_TAGS = frozenset(
    {
        "a",
        "abbr",
        "b",
        "blockquote",
        "br",
        "code",
        "dd",
        "del",
        "dl",
        "dt",
        "em",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "i",
        "img",
        "li",
        "ol",
        "p",
        "pre",
        "s",
        "span",
        "strong",
        "sub",
        "sup",
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "tr",
        "ul",
    }
)
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "img": {"src", "alt", "title"},
    "ol": {"start"},
    "td": {"align"},
    "th": {"align"},
}
# The only class kept: the one the renderer itself puts on the note that replaces an image.
# (nh3 wants a class listed here, not in ALLOWED_ATTRIBUTES.)
IMAGE_NOTE_CLASS = "image-not-loaded"
LINK_NOTE_CLASS = "link-removed"
ALLOWED_CLASSES = {"span": {IMAGE_NOTE_CLASS, LINK_NOTE_CLASS}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"


def is_same_origin_path(url: str) -> bool:
    """A path on this site (``/static/x.png``), nothing a browser could read as another host.

    Refused: schemes, ``//host``, backslashes (browsers read ``/\\host`` as ``//host``),
    and any whitespace or control character (browsers drop tabs and newlines inside URLs).
    """
    if not url.startswith("/") or url.startswith("//"):
        return False
    return not any(ch == "\\" or ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url)


ARTIFACT_IMAGE_PATH = re.compile(r"/artifacts/[A-Za-z0-9_.-]{1,60}/v[0-9]{1,10}/raw")


def is_artifact_image(url: str) -> bool:
    """An image the artifact store serves (``/artifacts/REPORT_001/v2/raw``): the only images shown."""
    return is_same_origin_path(url) and ARTIFACT_IMAGE_PATH.fullmatch(url) is not None


def absolute_form(url: str) -> str:
    """A protocol-relative URL as the absolute one a browser follows (``//h/x``, ``/\\h/x``
    → ``https://h/x``); any other URL as it is."""
    cleaned = "".join(ch for ch in url if not (ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F))
    head = cleaned[:2].replace("\\", "/")
    if head == "//":
        return "https://" + cleaned[2:].replace("\\", "/").lstrip("/")
    return url


def url_scheme(url: str) -> str:
    """The scheme a browser would see (lower case), or "" for a relative URL.

    Browsers drop whitespace and control characters inside a URL first, so
    ``java\tscript:`` is ``javascript:``.
    """
    cleaned = "".join(ch for ch in url if not (ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F))
    head = cleaned.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return head.split(":", 1)[0].lower() if ":" in head else ""


def is_allowed_link(url: str) -> bool:
    """http, https, mailto, or a link relative to this site."""
    scheme = url_scheme(url)
    return scheme in URL_SCHEMES if scheme else True


def _attribute_filter(tag: str, attribute: str, value: str) -> str | None:
    if tag == "img" and attribute == "src" and not is_artifact_image(value):
        return None
    if tag == "a" and attribute == "href":
        return absolute_form(value)
    return value


_CLEANER = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    clean_content_tags={"script", "style"},
    attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
    attribute_filter=_attribute_filter,
    link_rel=LINK_REL,
    url_schemes=set(URL_SCHEMES),
    allowed_classes={tag: set(names) for tag, names in ALLOWED_CLASSES.items()},
    strip_comments=True,
)


def sanitize_html(html: str) -> str:
    """Only the allowed tags, attributes and URL schemes; no off-site image sources."""
    return _CLEANER.clean(html)


class _InertLinksAndImages(Treeprocessor):
    """Notes instead of what must not work: off-site images and links with other schemes."""

    def run(self, root: etree.Element) -> None:
        for parent in root.iter():
            for index, child in enumerate(list(parent)):
                if child.tag == "img" and not is_artifact_image(child.get("src", "")):
                    note = etree.Element("span", {"class": IMAGE_NOTE_CLASS})
                    alt = child.get("alt", "") or "no description"
                    note.text = f"[image not loaded: {alt} — {child.get('src', '')}]"
                    note.tail = child.tail
                    parent.remove(child)
                    parent.insert(index, note)
                elif child.tag == "a" and child.get("href", "") != absolute_form(child.get("href", "")):
                    child.set("href", absolute_form(child.get("href", "")))
                if child.tag == "a" and not is_allowed_link(child.get("href", "")):
                    note = f" [link removed: {child.get('href', '')}]"
                    child.tag, child.attrib = "span", {"class": LINK_NOTE_CLASS}
                    if len(child):
                        child[-1].tail = (child[-1].tail or "") + note
                    else:
                        child.text = (child.text or "") + note


def _markdown() -> markdown.Markdown:
    """A fresh renderer (Markdown instances keep state between conversions)."""
    md = markdown.Markdown(extensions=[TableExtension(use_align_attribute=True), "fenced_code", "sane_lists"])
    # Raw HTML is text, never markup: without these two, "<b>" is escaped like any "<".
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    # After inline patterns made <a> and <img> (20), before placeholders are restored (0).
    md.treeprocessors.register(_InertLinksAndImages(md), "inert_links_and_images", 5)
    return md


# Texts up to this size are kept once rendered (the last CACHED_RENDERINGS of them).
CACHED_SOURCE_CHARS = 64 * 1024
CACHED_RENDERINGS = 64


def render_markdown(source: str) -> SafeString:
    """Markdown as sanitised HTML (see the module's contract). A function of the text
    alone, so the last ones are kept: an open execution page asks for the same draft at
    every refresh of its artifact panel (~10 ms to render a report here)."""
    return _cached_rendering(source) if len(source) <= CACHED_SOURCE_CHARS else _rendering(source)


def _rendering(source: str) -> SafeString:
    return mark_safe(sanitize_html(_markdown().convert(source)))  # sanitised just above


_cached_rendering = functools.lru_cache(maxsize=CACHED_RENDERINGS)(_rendering)
