"""The example's own tests (examples/expense_approval/tests/), collected here so they run
under keel's fixtures with ``make test``."""

from examples.expense_approval.tests.test_expense_approval import *  # noqa: F403
