"""The author's test kit (docs/design.md §6: ``executions.authoring.testing``), used the way an
author uses it: from a package outside keel's tree, in a pytest run of its own.

The module copies an author's project into a temporary folder away from keel's
checkout — ``tests/support/kit_project/parcels`` (a workflow with an approval, an
effect and a wait for a signal, and its tests written with the kit), and the files
docs/authoring.md builds (every code block marked ``<!-- file: PATH -->``, joined per
file: its ``pytest.ini``, the guide's ``myflows/expense.py`` and its tests) — and runs
``python -m pytest`` there once, as the guide says: keel's settings, its own test
database (``test_<ours>_author``, made and dropped by pytest-django), the broker of this
pytest process. Each test below is one of the author's tests, passed. So the kit
imports from an author's package, its processes import the author's modules, signals
and decisions are delivered, a timeout's message names the time actually waited, and
the guide's example runs as printed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "support" / "kit_project"
GUIDE = ROOT / "docs" / "authoring.md"
MARKED_BLOCK = re.compile(r"^<!-- file: (?P<path>\S+) -->\n```[a-z]*\n(?P<code>.*?)^```$", re.M | re.S)


def guide_files(text: str) -> dict[str, str]:
    """The guide's code blocks marked ``<!-- file: PATH -->``, joined per file in order."""
    files: dict[str, list[str]] = {}
    for block in MARKED_BLOCK.finditer(text):
        files.setdefault(block["path"], []).append(block["code"])
    return {path: "\n\n".join(parts) for path, parts in files.items()}


def authors_database() -> str:
    """Ours (``DATABASE_URL``) with ``_author`` and this pytest process's xdist name: pytest-django
    makes ``test_<that>`` for the author's run, its own, and drops it at the end."""
    ours = urlsplit(os.environ["DATABASE_URL"])
    suffix = f"_{os.environ['PYTEST_XDIST_WORKER']}" if os.environ.get("PYTEST_XDIST_WORKER") else ""
    return ours._replace(path=f"{ours.path}_author{suffix}").geturl()


def write_project(folder: Path) -> None:
    shutil.copytree(PROJECT, folder, ignore=shutil.ignore_patterns("__pycache__"))
    for path, code in guide_files(GUIDE.read_text()).items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.parent != folder:
            (target.parent / "__init__.py").touch()
        target.write_text(code)


@pytest.fixture(scope="module")
def authors_run(tmp_path_factory) -> dict[str, str]:
    """The author's project run once: {"<file>::<test>": "passed" or what failed}."""
    folder = tmp_path_factory.mktemp("author") / "work"
    write_project(folder)
    assert not folder.resolve().is_relative_to(ROOT)
    report = folder / "report.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DJANGO_", "KEEL_TEST_"))}
    env.update(
        PYTHONPATH=str(folder),  # the guide's `export PYTHONPATH=$HOME/work`
        DATABASE_URL=authors_database(),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        KEEL_VAR_DIR=str(folder / "var"),
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={report}", "myflows", "parcels"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    outcomes = {}
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname').replace('.', '/')}.py::{case.get('name')}"
            problems = [p for p in case if p.tag in ("failure", "error", "skipped")]
            outcomes[name] = (
                "passed" if not problems else "\n".join(f"{p.get('message', '')}\n{p.text}" for p in problems)
            )
    outcomes["(the run)"] = f"exit {done.returncode}\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    return outcomes


def passed(outcomes: dict[str, str], test: str) -> None:
    assert outcomes.get(test) == "passed", f"{test}: {outcomes.get(test, 'not run')}\n\n{outcomes['(the run)']}"


def test_signals_are_delivered(authors_run):
    passed(authors_run, "parcels/test_parcels.py::test_signals_are_delivered")


def test_decisions_are_delivered_on_the_exact_version(authors_run):
    passed(authors_run, "parcels/test_parcels.py::test_decisions_are_delivered_on_the_exact_version")


def test_a_wait_that_runs_out_names_the_time_it_waited(authors_run):
    passed(authors_run, "parcels/test_parcels.py::test_a_wait_that_runs_out_names_the_time_it_waited")


def test_a_crash_a_retried_decision_and_a_budget(authors_run):
    passed(authors_run, "parcels/test_parcels.py::test_a_crash_a_retried_decision_and_a_budget")


def test_the_guides_example_runs_as_printed(authors_run):
    guide = [name for name in authors_run if name.startswith("myflows/test_expense.py::")]
    assert len(guide) >= 2, authors_run["(the run)"]
    for name in guide:
        passed(authors_run, name)
    assert authors_run["(the run)"].startswith("exit 0"), authors_run["(the run)"]
