"""The OpenAI Agents SDK example (examples/openai_replacement/tests/), collected here so it runs
under keel's settings with ``make test``; tests/conftest.py marks those using ``keel``
``processes``."""

from examples.openai_replacement.tests.test_openai_replacement import *  # noqa: F403
