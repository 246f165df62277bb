"""Artifact content as HTML: Markdown rendered as written and sanitised, JSON summarised.

Pure functions first (no database), then ``render_artifact`` on stored versions.
"""

from __future__ import annotations

import json
import re

import pytest

from artifacts import presenters, sanitize
from artifacts.rendering import render_source
from artifacts.sanitize import is_allowed_link, is_same_origin_path, render_markdown, sanitize_html, url_scheme
from workflows import orders


def tags(html: str) -> list[str]:
    return re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", html)


# --- Markdown as written -------------------------------------------------------------


def test_a_code_span_with_a_less_than_sign_shows_it_once_escaped():
    html = render_markdown("Compare `a < b` and `x && y`.")
    assert "<code>a &lt; b</code>" in html and "<code>x &amp;&amp; y</code>" in html
    assert "&amp;lt;" not in html  # the old double escape


def test_tables_headings_lists_and_emphasis_render_without_style_attributes():
    html = render_markdown("# Title\n\n- **bold** _it_\n\n| a | b |\n|:--|--:|\n| 1 | 2 |\n")
    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html and "<em>it</em>" in html
    assert '<td align="right">2</td>' in html and '<th align="left">a</th>' in html
    assert "style=" not in html  # the CSP forbids inline styles


def test_a_fenced_code_block_keeps_its_text():
    html = render_markdown("```\n<script>alert(1)</script>\nif a < b:\n```\n")
    assert "<pre><code>&lt;script&gt;alert(1)&lt;/script&gt;\nif a &lt; b:" in html
    assert "<script" not in html


# --- Raw HTML never becomes markup -----------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "<script>alert(1)</script>",
        '<img src="x" onerror="alert(1)">',
        "<iframe src='https://evil.example/'></iframe>",
        '<a href="javascript:alert(1)">click</a>',
        "<div onclick='alert(1)'>hi</div>",
        "<style>body{display:none}</style>",
        "<form action='https://evil.example'><button>go</button></form>",
    ],
)
def test_raw_html_in_markdown_is_shown_as_text(raw):
    html = render_markdown(f"Before\n\n{raw}\n\nInline {raw} too.\n")
    assert tags(html) == ["p", "p", "p"]  # nothing but the paragraphs the Markdown made
    escaped = raw.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert escaped.replace("'", "&#x27;").replace('"', "&quot;") in html or escaped in html


@pytest.mark.parametrize(
    ("dirty", "clean"),
    [
        ("<p>ok<script>alert(1)</script></p>", "<p>ok</p>"),
        ('<img src="/artifacts/A_1/v1/raw" onerror="alert(1)">', '<img src="/artifacts/A_1/v1/raw">'),
        ('<img src="/static/a.png">', "<img>"),  # this site, but not the artifact store
        (
            '<a href="//evil.example/x">a</a>',
            '<a href="https://evil.example/x" rel="noopener noreferrer nofollow">a</a>',
        ),
        ('<a href="javascript:alert(1)" onclick="x">a</a>', '<a rel="noopener noreferrer nofollow">a</a>'),
        ('<a href="java\tscript:alert(1)">a</a>', '<a rel="noopener noreferrer nofollow">a</a>'),
        ('<a href="data:text/html,hi">a</a>', '<a rel="noopener noreferrer nofollow">a</a>'),
        ('<a href="vbscript:x">a</a>', '<a rel="noopener noreferrer nofollow">a</a>'),
        (
            '<a href="https://ok.example/" target="_top">a</a>',
            '<a href="https://ok.example/" rel="noopener noreferrer nofollow">a</a>',
        ),
        ('<img src="https://evil.example/x.png">', "<img>"),
        ('<img src="//evil.example/x.png">', "<img>"),
        ('<img src="/\\evil.example/x.png">', "<img>"),
        ('<img src="data:image/png;base64,AAAA">', "<img>"),
        ("<iframe src='/'></iframe><object data='/x'></object><embed src='/x'>", ""),
        ('<span style="color:red" class="x image-not-loaded">s</span>', '<span class="image-not-loaded">s</span>'),
        ("<style>p{}</style><p>t</p><!-- c -->", "<p>t</p>"),
        ("<svg><script>alert(1)</script></svg><p>t</p>", "<p>t</p>"),
    ],
)
def test_the_sanitiser_keeps_only_allowed_tags_attributes_and_urls(dirty, clean):
    """The second line of defence: HTML that reaches nh3 with anything live in it."""
    assert sanitize_html(dirty) == clean


# --- Links and images -----------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", "JavaScript:alert(1)", " javascript:alert(1)", "java\nscript:x", "data:text/html,x"]
)
def test_a_markdown_link_with_another_scheme_is_text_with_a_note(url):
    html = render_markdown(f"[Verify]({url}) now")
    assert "<a" not in html and "href" not in html
    assert '<span class="link-removed">Verify [link removed:' in html


def test_allowed_links_get_rel_noopener_noreferrer_nofollow():
    html = render_markdown("[site](https://ok.example/a?b=1&c=2) [mail](mailto:a@example.com) [here](/executions/)")
    assert html.count('rel="noopener noreferrer nofollow"') == 3
    assert 'href="https://ok.example/a?b=1&amp;c=2"' in html and 'href="mailto:a@example.com"' in html
    assert 'href="/executions/"' in html


@pytest.mark.parametrize(
    "src",
    [
        "https://evil.example/x.png",
        "http://evil.example/x.png",
        "//evil.example/x.png",
        "data:image/png;base64,iVBORw0KGgo=",
    ],
)
def test_an_image_from_elsewhere_is_not_loaded_but_named(src):
    html = render_markdown(f"See ![chart]({src}) here")
    assert "<img" not in html
    assert f'<span class="image-not-loaded">[image not loaded: chart — {src}]</span>' in html


def test_an_image_from_the_artifact_store_is_kept_and_no_other_path_of_this_site():
    html = render_markdown("![logo](/artifacts/REPORT_001/v2/raw)")
    assert '<img alt="logo" src="/artifacts/REPORT_001/v2/raw">' in html
    for path in ("/approvals/12/", "/executions/RUN_0001/", "/static/logo.png", "/artifacts/REPORT_001/v2/"):
        html = render_markdown(f"![x]({path})")  # a GET no reader meant to make: never loaded
        assert "<img" not in html and f"[image not loaded: x — {path}]" in html


@pytest.mark.parametrize("href", ["//evil.example/login", "/\\evil.example/login", " //evil.example/login"])
def test_a_protocol_relative_link_is_the_absolute_link_it_is(href):
    html = render_markdown(f"[sign in]({href})")
    assert 'href="https://evil.example/login"' in html and 'rel="noopener noreferrer nofollow"' in html


def test_the_hostile_constraint_of_s31_is_inert():
    """S31 at the rendering layer: a javascript: link, a remote image and raw script."""
    source = "- [Verify](javascript:alert(1)) ![x](https://evil.example/x.png) <script>alert(1)</script>\n"
    html = str(render_markdown(source))
    assert "javascript:" not in re.sub(r"\[link removed: [^\]]*\]", "", html)
    assert "<script" not in html and "<img" not in html and "href=" not in html
    assert "evil.example" in html  # named as text, so the approver sees it was there


@pytest.mark.parametrize(
    ("url", "same_origin"),
    [
        ("/static/a.png", True),
        ("/artifacts/REPORT_001/v1/raw", True),
        ("//evil.example/a.png", False),
        ("/\\evil.example/a.png", False),
        ("/\t/evil.example/a.png", False),
        ("https://evil.example/a.png", False),
        ("a.png", False),
        ("", False),
    ],
)
def test_same_origin_paths(url, same_origin):
    assert is_same_origin_path(url) is same_origin


def test_url_schemes_as_a_browser_reads_them():
    assert url_scheme("JAVA\tSCRIPT:alert(1)") == "javascript"
    assert url_scheme("/a:b") == "" and url_scheme("?x=1") == "" and url_scheme("#top") == ""
    assert is_allowed_link("https://x") and is_allowed_link("/x") and not is_allowed_link("ftp://x")


# --- JSON artifacts -------------------------------------------------------------------


def proposal() -> dict:
    return orders.replacement_proposal(orders.get_order("ORD-1001"), reference="RUN_0001:submit_order:v1", version=1)


def test_a_replacement_proposal_reads_as_an_order():
    source = orders.render_proposal(proposal())
    html = str(render_source(content_type="application/json", source=source, kind="order", sha256="ab" * 32, number=1))
    for text in (
        "Ana Pereira",
        "ana.pereira@example.com",
        "Rua das Flores 12<br>4050-262 Porto<br>PT",
        "ORD-1001",
        "43.90 EUR",
        "0.00 EUR",
        "RUN_0001:submit_order:v1",
        "Arrived broken: the parcel was crushed in transit",
    ):
        assert text in html, text
    rows = re.findall(r"<tr>(.*?)</tr>", html.split("<tbody>")[1], re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    assert cells == [
        ["SKU-MUG-01", "Stoneware mug, blue", "2", "12.50 EUR", "25.00 EUR"],
        ["SKU-PLT-02", "Dinner plate, 27 cm", "1", "18.90 EUR", "18.90 EUR"],
    ]
    # The exact bytes and their hash, a click away.
    details = html.split('<details class="canonical-json">')[1].split("</details>")[0]
    assert "ab" * 32 in details and "Canonical JSON of V1" in details
    assert json.loads(details.split('<pre class="json-source">')[1].split("</pre>")[0].replace("&quot;", '"')) == (
        json.loads(source)
    )


def test_a_json_artifact_without_a_presenter_gets_the_generic_summary():
    data = {"title": "T", "count": 3, "ok": True, "owner": {"name": "N"}, "rows": [{"a": 1, "b": "x"}, {"a": 2}]}
    html = str(render_source(content_type="application/json", source=json.dumps(data), kind="other"))
    assert "<dt>Title</dt><dd>T</dd>" in html and "<dt>Ok</dt><dd>yes</dd>" in html
    assert "<h3>Owner</h3>" in html and "<dt>Name</dt><dd>N</dd>" in html
    assert '<th scope="col" class="num">A</th>' in html and '<td class="num">2</td><td></td>' in html


def test_a_presenter_that_does_not_fit_falls_back_to_the_generic_summary():
    html = str(render_source(content_type="application/json", source='{"currency": "EUR"}', kind="order"))
    assert "doesn&#x27;t have the expected shape" in html and "<dt>Currency</dt><dd>EUR</dd>" in html


def test_invalid_json_is_shown_as_stored_with_a_message():
    html = str(render_source(content_type="application/json", source="{not json <b>", kind="order"))
    assert 'role="alert"' in html and "Not valid JSON" in html and "{not json &lt;b&gt;" in html
    assert '<details class="canonical-json" open>' in html


def test_json_values_are_escaped():
    html = str(render_source(content_type="application/json", source='{"name": "<script>x</script>"}', kind="x"))
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_other_text_is_verbatim_and_escaped():
    assert str(render_source(content_type="text/plain", source="<b>a</b>")) == "<pre>&lt;b&gt;a&lt;/b&gt;</pre>"


def test_a_kind_has_one_presenter():
    with pytest.raises(ValueError, match="already registered"):
        presenters.register("order", lambda data: presenters.generic_summary(data))


def test_a_rendering_is_kept_for_the_same_text_and_a_long_text_is_rendered_each_time():
    sanitize._cached_rendering.cache_clear()
    text = "# Draft\n\n<script>alert(1)</script> [x](javascript:alert(1))\n"
    first = render_markdown(text)
    assert render_markdown(text) is first  # kept: the same object
    assert first == sanitize._rendering(text)  # and what a fresh rendering gives
    long = text + "word " * sanitize.CACHED_SOURCE_CHARS
    assert render_markdown(long) == render_markdown(long)
    assert sanitize._cached_rendering.cache_info().currsize == 1  # the long one was not kept
