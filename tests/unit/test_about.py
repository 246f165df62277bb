"""Issue 39, item 15: the inbox and the approval mail didn't name the report's month. The
line that says what an execution is about, from its input (``executions.about``)."""

from __future__ import annotations

from executions.about import about


def test_a_monthly_report_is_about_its_month():
    """Issue 39 item 15: ``{"month": "2026-06", "constraints": [...]}`` → ``month 2026-06``."""
    assert about({"month": "2026-06", "constraints": ["keep it short"]}) == "month 2026-06"


def test_any_workflow_shows_its_scalar_fields_clipped_on_one_line():
    """Issue 39 item 15: scalars in order, lists/objects/nulls left out, line breaks folded, long values clipped."""
    line = about({"original_order": "ORD-1001", "confirm_within_seconds": 60, "urgent": True, "x": None, "o": {}})
    assert line == "original order ORD-1001, confirm within seconds 60, urgent yes"
    folded = about({"note": "two\r\nlines\x00 " + "z" * 100})
    assert "\n" not in folded and "\r" not in folded and "\x00" not in folded and folded.endswith("…")
    assert len(about({f"k{i}": "v" * 40 for i in range(10)})) <= 100
    assert about([1, 2]) == "" and about({}) == ""
