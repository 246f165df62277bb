"""Schemathesis over /api/openapi.json: every operation, as a manager and as an operator.

Bounded and reproducible (derandomized; ``KEEL_FUZZ_EXAMPLES`` raises the count per
operation and mode). Each operation is fuzzed with valid data aimed at real objects
(an execution awaiting approval, its artifact) and with invalid data anywhere
(negative mode). The checks: no 5xx, every status code declared, content types and
bodies as the schema says. Hostile values the generator rarely hits (NUL, surrogates,
integers past range, oversize bodies) are thrown on purpose by tests/integration/test_edge.py.
"""

from __future__ import annotations

import contextlib
import os

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

EXAMPLES = int(os.environ.get("KEEL_FUZZ_EXAMPLES", "10"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@contextlib.contextmanager
def one_connection():
    """The WSGI handler closes the database connection after each request (the test
    settings keep none: CONN_MAX_AGE=0), so a thousand calls would be a thousand new
    PostgreSQL sessions. As Django's own test client does, keep this thread's one."""
    for signal in (signals.request_started, signals.request_finished):
        signal.disconnect(close_old_connections)
    try:
        yield
    finally:
        for signal in (signals.request_started, signals.request_finished):
            signal.connect(close_old_connections)


@pytest.mark.parametrize("role", ["manager", "operator"])
def test_every_operation_answers_as_its_schema_says_and_never_5xx(people, awaiting, role):
    execution, request = awaiting
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())
    headers = {"Authorization": f"Bearer {people[role].token}"}
    real = {
        "execution_id": execution.ref,
        "key": f"{execution.ref}:publish:v1",
        "artifact_id": request.artifact_version.artifact.ref,
        "n": request.version,
    }
    failures, operations = [], 0
    with one_connection():  # every call of the fuzz on this thread's connection
        for result in schema.get_all_operations():
            operation = result.ok()
            operations += 1
            aimed = {p.name: real[p.name] for p in operation.path_parameters if p.name in real}
            for mode, path_parameters in ((GenerationMode.POSITIVE, aimed), (GenerationMode.NEGATIVE, None)):
                strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)

                @settings(
                    max_examples=EXAMPLES,
                    deadline=None,
                    database=None,
                    derandomize=True,
                    suppress_health_check=list(HealthCheck),
                    report_multiple_bugs=False,
                )
                @given(case=strategy)
                def run(case):
                    case.call_and_validate(headers=headers, checks=CHECKS)

                try:
                    run()
                except Exception as failure:  # collect all operations' failures, then report
                    failures.append(f"{operation.label} ({mode.value}): {failure}")
    assert operations >= 9, "the schema lost operations"
    assert not failures, "\n\n".join(failures)
