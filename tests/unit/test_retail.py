"""Unit tests for workflows.retail and the retail snapshot generator (no database)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from workflows import retail
from workflows.retail import UnknownMonth

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "workflows" / "data" / "make_retail_snapshot.py"
SNAPSHOT_FILE = ROOT / "workflows" / "data" / "retail_snapshot_v1.json"

MONTHS = [f"2026-{m:02d}" for m in range(1, 11)]


@pytest.fixture(scope="module")
def august() -> dict:
    return retail.month_figures("2026-08")


@pytest.fixture(scope="module")
def august_facts(august: dict) -> list[dict]:
    return retail.verified_facts(august)


def _resolve(figures: dict, source: str) -> object:
    """Follow a fact source such as ``retail_snapshot_v1:2026-08:by_store.S04.change_pct``."""
    snapshot_id, month, path = source.split(":")
    assert snapshot_id == figures["snapshot_id"]
    assert month == figures["month"]
    node: object = figures
    for part in path.split("."):
        if isinstance(node, list):
            key = "date" if node and "date" in node[0] else "id"
            node = next(item for item in node if item[key] == part)
        else:
            node = node[part]
    return node


def _render(figures: dict, facts: list[dict], **overrides: object) -> str:
    kwargs = {
        "month": figures["month"],
        "figures": figures,
        "facts": facts,
        "narrative": "August softened overall; Eindhoven was closed for renovation.",
        "constraints": ["Use only snapshot figures", "Keep it to one page"],
        "version": 2,
        "model_label": "test-model",
    }
    kwargs.update(overrides)
    return retail.render_report(**kwargs)


# ----------------------------------------------------------------------- snapshot


def test_snapshot_shape() -> None:
    snap = retail.load_snapshot()
    assert snap["snapshot_id"] == retail.SNAPSHOT_ID == "retail_snapshot_v1"
    assert snap["currency"] == "EUR"
    assert (snap["first_day"], snap["last_day"]) == ("2026-01-01", "2026-10-31")
    n_days = (date(2026, 10, 31) - date(2026, 1, 1)).days + 1
    store_ids = [s["id"] for s in snap["stores"]]
    category_ids = [c["id"] for c in snap["categories"]]
    assert len(store_ids) == 6
    assert 7 <= len(category_ids) <= 8
    for table in ("sales", "transactions"):
        assert sorted(snap[table]) == sorted(store_ids)
        for sid in store_ids:
            assert sorted(snap[table][sid]) == sorted(category_ids)
            for series in snap[table][sid].values():
                assert len(series) == n_days
                assert all(isinstance(v, int) and v >= 0 for v in series)


def test_load_snapshot_is_cached() -> None:
    assert retail.load_snapshot() is retail.load_snapshot()


def test_snapshot_file_is_commit_sized() -> None:
    assert SNAPSHOT_FILE.stat().st_size < 300_000


def test_regenerating_snapshot_gives_identical_bytes(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "snapshot.json"
    subprocess.run([sys.executable, str(SCRIPT), str(out)], check=True, capture_output=True, cwd=tmp_path)
    assert out.read_bytes() == SNAPSHOT_FILE.read_bytes()
    assert json.loads(out.read_bytes()) == retail.load_snapshot()


# ------------------------------------------------------------------------- months


def test_available_months() -> None:
    assert retail.available_months() == MONTHS


@pytest.mark.parametrize("month", ["2026-12", "2025-08"])
def test_unknown_month_out_of_range(month: str) -> None:
    with pytest.raises(UnknownMonth) as excinfo:
        retail.month_figures(month)
    message = str(excinfo.value)
    assert month in message
    assert "retail_snapshot_v1" in message
    assert "2026-01 to 2026-10" in message
    assert excinfo.value.month == month


@pytest.mark.parametrize("month", ["2026-8", "August", "", "2026-13", "2026-08-01", None])
def test_unknown_month_malformed(month: object) -> None:
    with pytest.raises(UnknownMonth, match="expected YYYY-MM"):
        retail.month_figures(month)  # type: ignore[arg-type]


def test_unknown_month_is_a_value_error() -> None:
    assert issubclass(UnknownMonth, ValueError)


def test_month_label() -> None:
    assert retail.month_label("2026-08") == "August 2026"
    assert retail.month_label("2026-01") == "January 2026"


# ------------------------------------------------------------------------ figures


def test_august_figures_are_internally_consistent(august: dict) -> None:
    assert august["snapshot_id"] == "retail_snapshot_v1"
    assert august["month"] == "2026-08"
    assert august["previous_month"] == "2026-07"
    assert august["days"] == 31 == len(august["daily"])
    revenue = august["revenue"]
    assert revenue > 0
    assert sum(s["revenue"] for s in august["by_store"]) == revenue
    assert sum(c["revenue"] for c in august["by_category"]) == revenue
    assert sum(d["revenue"] for d in august["daily"]) == revenue
    assert sum(s["transactions"] for s in august["by_store"]) == august["transactions"]
    assert sum(c["transactions"] for c in august["by_category"]) == august["transactions"]
    assert august["average_basket"] == round(revenue / august["transactions"], 2)
    assert [d["date"] for d in august["daily"]] == [f"2026-08-{d:02d}" for d in range(1, 32)]


def test_previous_month_matches_july(august: dict) -> None:
    july = retail.month_figures("2026-07")
    assert august["previous"] == {
        "revenue": july["revenue"],
        "transactions": july["transactions"],
        "average_basket": july["average_basket"],
    }
    for store, july_store in zip(august["by_store"], july["by_store"], strict=False):
        expected = round((store["revenue"] - july_store["revenue"]) / july_store["revenue"] * 100, 1)
        assert store["change_pct"] == expected


def test_august_tells_a_story(august: dict) -> None:
    """The snapshot is shaped so the seed workflow has real things to report."""
    stores = {s["id"]: s for s in august["by_store"]}
    worst_store = min(august["by_store"], key=lambda s: s["change_pct"])
    assert worst_store["id"] == "S04"
    assert worst_store["change_pct"] < -10
    assert stores["S04"]["trading_days"] < august["days"]
    best_category = max(august["by_category"], key=lambda c: c["change_pct"])
    assert best_category["id"] == "stationery"
    assert best_category["change_pct"] > 30


def test_first_month_has_no_previous() -> None:
    january = retail.month_figures("2026-01")
    assert january["previous_month"] is None
    assert january["previous"] is None
    assert all(s["change_pct"] is None for s in january["by_store"])
    assert all(c["change_pct"] is None for c in january["by_category"])


def test_figures_are_json_serialisable_and_deterministic(august: dict) -> None:
    assert json.loads(json.dumps(august)) == august
    assert retail.month_figures("2026-08") == august


# -------------------------------------------------------------------------- facts


def test_facts_shape(august_facts: list[dict]) -> None:
    assert 5 <= len(august_facts) <= 8
    assert [f["id"] for f in august_facts] == [f"F{i}" for i in range(1, len(august_facts) + 1)]
    for fact in august_facts:
        assert set(fact) == {"id", "statement", "value", "source"}
        assert fact["source"].startswith("retail_snapshot_v1:2026-08:")


def test_fact_values_come_from_figures(august: dict, august_facts: list[dict]) -> None:
    by_source = {f["source"]: f for f in august_facts}
    assert by_source["retail_snapshot_v1:2026-08:revenue"]["value"] == august["revenue"]
    assert by_source["retail_snapshot_v1:2026-08:transactions"]["value"] == august["transactions"]
    assert by_source["retail_snapshot_v1:2026-08:average_basket"]["value"] == august["average_basket"]
    for fact in august_facts:
        assert _resolve(august, fact["source"]) == fact["value"], fact


def test_revenue_fact_statement(august: dict, august_facts: list[dict]) -> None:
    f1 = august_facts[0]
    assert f1["statement"].startswith(f"August 2026 revenue was EUR {august['revenue']:,}")
    change = round((august["revenue"] - august["previous"]["revenue"]) / august["previous"]["revenue"] * 100, 1)
    direction = "up" if change > 0 else "down"
    assert f"{direction} {abs(change):.1f}% on July 2026" in f1["statement"]


def _numbers_in(value: object) -> set[str]:
    """Every way a number in ``figures`` may legitimately be written in a statement."""
    out: set[str] = set()
    if isinstance(value, dict):
        for v in value.values():
            out |= _numbers_in(v)
    elif isinstance(value, list):
        for v in value:
            out |= _numbers_in(v)
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, int):
        out |= {str(abs(value)), f"{abs(value):,}"}
    elif isinstance(value, float):
        out |= {f"{abs(value):.1f}", f"{abs(value):.2f}", f"{abs(value):,.2f}"}
    elif isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", value):
        parts = value.split("-")
        out |= {parts[0], *(str(int(p)) for p in parts[1:])}
    return out


def test_every_number_in_statements_is_derived_from_figures(august: dict, august_facts: list[dict]) -> None:
    allowed = _numbers_in(august)
    # percentages the facts compute from the totals
    prev = august["previous"]
    for key in ("revenue", "transactions"):
        allowed.add(f"{abs(round((august[key] - prev[key]) / prev[key] * 100, 1)):.1f}")
    for fact in august_facts:
        for token in re.findall(r"(?<!\w)\d[\d,]*(?:\.\d+)?", fact["statement"]):
            token = token.rstrip(",.")
            assert token in allowed, (token, fact["statement"])


def test_facts_for_first_month() -> None:
    january = retail.month_figures("2026-01")
    facts = retail.verified_facts(january)
    assert 5 <= len(facts) <= 8
    assert facts[0]["value"] == january["revenue"]
    for fact in facts:
        assert _resolve(january, fact["source"]) == fact["value"]


def test_facts_survive_json_round_trip(august: dict, august_facts: list[dict]) -> None:
    assert retail.verified_facts(json.loads(json.dumps(august))) == august_facts


# ------------------------------------------------------------------------- report


def test_render_report_is_deterministic(august: dict, august_facts: list[dict]) -> None:
    first = _render(august, august_facts)
    second = _render(json.loads(json.dumps(august)), json.loads(json.dumps(august_facts)))
    assert first == second
    assert first.encode("utf-8") == second.encode("utf-8")


def test_render_report_content(august: dict, august_facts: list[dict]) -> None:
    report = _render(august, august_facts, version=3)
    assert report.startswith("# Monthly performance report — August 2026\n")
    assert "Draft V3" in report
    assert "retail_snapshot_v1" in report
    for heading in ("## Summary", "## Verified facts", "## Stores", "## Categories", "## Instructions for this draft"):
        assert f"\n{heading}\n" in report
    assert "Eindhoven was closed for renovation." in report
    for fact in august_facts:
        assert f"**{fact['id']}**" in report
        assert fact["source"] in report
    for store in august["by_store"]:
        assert store["name"] in report
    for category in august["by_category"]:
        assert category["name"] in report
    assert "- Use only snapshot figures" in report
    assert report.rstrip("\n").endswith("Narrative written by test-model.")
    assert report.endswith("\n") and not report.endswith("\n\n")


def test_render_report_varies_with_version(august: dict, august_facts: list[dict]) -> None:
    assert _render(august, august_facts, version=1) != _render(august, august_facts, version=2)


def test_render_report_omits_empty_constraints(august: dict, august_facts: list[dict]) -> None:
    assert "Instructions for this draft" not in _render(august, august_facts, constraints=[])
    assert "Instructions for this draft" not in _render(august, august_facts, constraints=["  "])


def test_a_requested_change_is_never_claimed_as_done(august: dict, august_facts: list[dict]) -> None:
    """Issue 17: the offline model and the report list a manager's requested change as
    asked, never as honoured or followed (the draft does not contain a store ranking)."""
    from executions.agent.modelclient import OfflineModelClient
    from executions.authoring.modelcalls import ModelRequest

    report = _render(august, august_facts, constraints=["Add a store ranking"])
    assert "- Add a store ranking" in report and "not a claim that it was done" in report
    assert "honoured" not in report.lower() and "followed" not in report.lower()
    # The offline model reads the constraints of the prompt's own block (notes.render's shape).
    prompt = "- [F1] Revenue rose. (source: x)\n\nMandatory constraints:\n- MUST: Add a store ranking"
    answer = OfflineModelClient().complete(
        ModelRequest(prompt_id="p", prompt_version="v", system="", messages=({"role": "user", "content": prompt},)),
        call_key="k",
    )
    assert "Add a store ranking" in answer.text and "does not carry instructions out" in answer.text
    assert "followed" not in answer.text.lower() and "honoured" not in answer.text.lower()


def test_render_report_rejects_mismatched_month(august: dict, august_facts: list[dict]) -> None:
    with pytest.raises(ValueError, match="2026-07"):
        _render(august, august_facts, month="2026-07")
    with pytest.raises(UnknownMonth):
        _render(august, august_facts, month="August")
    with pytest.raises(ValueError, match="version"):
        _render(august, august_facts, version=0)
