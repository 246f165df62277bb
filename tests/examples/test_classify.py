"""The worked example of a new step kind (examples/classify/tests/), collected here so it
runs under keel's settings with ``make test``; tests/conftest.py marks those using
``keel`` ``processes``."""

from examples.classify.tests.test_classify import *  # noqa: F403
