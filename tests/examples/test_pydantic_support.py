"""The pydantic-ai example (examples/pydantic_support/tests/), collected here so it runs
under keel's settings with ``make test``; tests/conftest.py marks those using ``keel``
``processes``."""

from examples.pydantic_support.tests.test_pydantic_support import *  # noqa: F403
