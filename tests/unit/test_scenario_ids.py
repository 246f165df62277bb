"""Every recovery scenario S01–S48 (docs/scenarios.md), and those of the fourth round built so
far (``BUILT``), has a test in tests/scenarios named by its id (``test_s04_…``; one test
may name several, ``test_s25_s16_…``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def scenario_tests() -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for path in sorted(SCENARIOS.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and (ids := re.match(r"test_((?:s\d\d_)+)", node.name)):
                for n in re.findall(r"s(\d\d)_", ids.group(1)):
                    found.setdefault(int(n), []).append(f"{path.name}::{node.name}")
    return found


# The fourth round's scenarios built so far: guarantees for any workflow (issue 38), control
# flow (issue 40), agents and tools from elsewhere (issue 42), single sign-on and access by
# workflow (adoption).
BUILT = [49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63]


def test_every_scenario_built_has_a_test_named_by_its_id():
    found = scenario_tests()
    assert [n for n in [*range(1, 49), *BUILT] if n not in found] == []
