"""Draw one execution's trace as a waterfall, the way a trace viewer shows it, from the
spans the S59 test's local OTLP receiver decoded (docs/screenshots/trace.png):

    KEEL_TRACE_DUMP=/tmp/trace.json make test PYTEST_ARGS="-k s59 tests/scenarios/test_observability.py"
    .venv/bin/python scripts/trace_waterfall.py /tmp/trace.json docs/screenshots/trace.png
"""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

SHOWN = (
    "keel.step",
    "keel.visit",
    "keel.outcome",
    "gen_ai.request.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "keel.action.key",
    "keel.action.status",
    "keel.decision",
    "keel.actor",
    "keel.status",
    "http.route",
)


def rows(spans: list[dict]) -> list[tuple[int, dict]]:
    """Depth-first from the root, children by start time; the linked request spans last."""
    by_parent: dict[str, list[dict]] = {}
    for span in spans:
        by_parent.setdefault(span["parent"], []).append(span)
    [root] = [s for s in spans if s["name"] == "keel.execution"]
    out: list[tuple[int, dict]] = []

    def walk(span: dict, depth: int) -> None:
        out.append((depth, span))
        for child in sorted(by_parent.get(span["span_id"], []), key=lambda s: s["start"]):
            walk(child, depth + 1)

    walk(root, 0)
    seen = {s["span_id"] for _, s in out}
    out += [(0, s) for s in sorted(spans, key=lambda s: s["start"]) if s["span_id"] not in seen]
    return out


def page(spans: list[dict]) -> str:
    [root] = [s for s in spans if s["name"] == "keel.execution"]
    t0, t1 = root["start"], root["end"]
    width = max(t1 - t0, 1)
    lines = []
    for depth, span in rows(spans):
        left = max(0.0, (span["start"] - t0) / width * 100)
        bar = max(0.4, (span["end"] - span["start"]) / width * 100)
        attrs = " ".join(f"{k.split('.')[-1]}={span['attributes'][k]}" for k in SHOWN if k in span["attributes"])
        other = span["trace_id"] != root["trace_id"]
        colour = "#9aa5b1" if other else ("#2f6fdf" if span["name"] == "keel.step" else "#2a9d6f")
        ms = (span["end"] - span["start"]) / 1e6
        lines.append(
            f'<tr><td style="padding-left:{depth * 14 + 4}px">{html.escape(span["name"])}'
            f'{" <em>(linked request)</em>" if other else ""}</td><td class="bar"><div style="margin-left:{left:.2f}%;'
            f'width:{bar:.2f}%;background:{colour}"></div></td><td>{ms:,.1f} ms</td>'
            f"<td class=a>{html.escape(attrs)}</td></tr>"
        )
    return (
        "<html><head><style>body{font:13px system-ui;margin:16px}table{border-collapse:collapse;width:100%}"
        "td{padding:2px 6px;border-bottom:1px solid #eee;white-space:nowrap}td.bar{width:38%}"
        "td.bar div{height:12px;border-radius:2px}td.a{color:#555;font-size:11px}</style></head><body>"
        f"<h3>Trace {root['trace_id']} · {html.escape(root['attributes']['keel.execution.id'])} · "
        f"{len(spans)} spans from {len({s['service'] for s in spans})} service(s)</h3>"
        f"<table>{''.join(lines)}</table></body></html>"
    )


def main() -> None:
    source, target = sys.argv[1], sys.argv[2]
    spans = json.loads(Path(source).read_text())
    [root] = [s for s in spans if s["name"] == "keel.execution"]
    # The execution's spans, and the requests linked with it (not the page's polls).
    spans = [s for s in spans if s["trace_id"] == root["trace_id"] or any(t == root["trace_id"] for t, _ in s["links"])]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"], headless=True)
        view = browser.new_page(viewport={"width": 1400, "height": 900})
        view.set_content(page(spans))
        view.screenshot(path=target, full_page=True)
        browser.close()


if __name__ == "__main__":
    main()
