"""The expense port's own tests (examples/expense/tests/), collected here so they run under
keel's settings with ``make test``; tests/conftest.py marks those using ``keel`` ``processes``."""

from examples.expense.tests.test_expense import *  # noqa: F403
