"""The refunds agent port's own tests (examples/refunds_agent/tests/), collected here so they
run under keel's settings with ``make test``; tests/conftest.py marks those using ``keel``
``processes``."""

from examples.refunds_agent.tests.test_refunds_agent import *  # noqa: F403
