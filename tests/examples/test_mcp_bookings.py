"""The MCP bookings example (examples/mcp_bookings/tests/), collected here so it runs
under keel's settings with ``make test``; tests/conftest.py marks those using ``keel``
``processes``."""

from examples.mcp_bookings.tests.test_mcp_bookings import *  # noqa: F403
