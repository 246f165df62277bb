"""``KEEL_WORKFLOW_MODULES`` (issue 20, docs/design.md §4): a module named there that doesn't import
stops start-up — ``manage.py check`` and a Celery worker here — with one sentence naming
the module and the error, never a traceback. (The modules that do import run end to end
in tests/examples and tests/browser/test_browser_start_forms.py.)"""

from __future__ import annotations

import subprocess

import pytest

from tests.support.procs import BIN, ROOT
from tests.support.stack import app_env

BROKEN = "examples.no_such_package.flows"
pytestmark = pytest.mark.processes  # it starts a Celery worker (which stops at once)


@pytest.mark.parametrize(
    "command",
    [
        [str(BIN / "python"), "manage.py", "check"],
        [str(BIN / "celery"), "-A", "config", "worker", "--pool=solo", "--loglevel=WARNING"],
    ],
    ids=["manage.py check", "celery worker"],
)
def test_a_module_that_does_not_import_stops_start_up_naming_it(command, tmp_path, transactional_db):
    env = {**app_env(tmp_path), "KEEL_WORKFLOW_MODULES": f"examples.expense_approval.workflow,{BROKEN}"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    sentence = [line for line in done.stderr.splitlines() if line.startswith("keel:")]
    assert sentence == [
        f"keel: KEEL_WORKFLOW_MODULES names {BROKEN}, which does not import: "
        "ModuleNotFoundError: No module named 'examples.no_such_package'"
    ], done.stderr
    assert "Traceback" not in done.stderr


def test_a_module_that_registers_no_workflow_is_said_at_start_up(tmp_path, transactional_db):
    """The package named instead of its workflow module (``examples.expense``): it imports
    and registers nothing, so start-up says so and names the module meant; the catalogue
    would otherwise just lack the workflow, without a word."""
    env = {**app_env(tmp_path), "KEEL_WORKFLOW_MODULES": "examples.expense,examples.classify.workflow"}
    command = [str(BIN / "python"), "manage.py", "check"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    said = "KEEL_WORKFLOW_MODULES names examples.expense, which registered no workflow"
    assert f"{said} (did you mean examples.expense.workflow?)" in done.stderr, done.stderr
    assert "examples.classify.workflow, which registered" not in done.stderr
