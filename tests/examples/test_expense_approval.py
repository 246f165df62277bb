"""The example's own tests (examples/expense_approval/tests/), collected here so they run
under keel's settings with ``make test``. Their ``keel`` fixture (the author's kit) starts
processes: tests/conftest.py marks the tests that use it ``processes``."""

from examples.expense_approval.tests.test_expense_approval import *  # noqa: F403
