"""Traces and errors as the environment configures them (docs/operations.md, "Traces and
errors"): off and unloaded when unset; a malformed endpoint, DSN or trace viewer URL stops
start-up with one sentence; the API and the execution page name the execution's trace."""

from __future__ import annotations

import pytest

from executions import runtime
from executions.models import Execution
from executions.services import execution_start
from tests.support.screens import logged_in
from tests.support.settings_probe import clean_env, django

LOADED = (
    "import sys; print(sorted(m for m in ('opentelemetry.sdk.trace', 'sentry_sdk') if m in sys.modules)); "
    "from executions.engine import tracing; print(tracing.enabled())"
)


def test_unset_nothing_is_loaded_and_nothing_is_exported(tmp_path):
    done = django(clean_env(tmp_path), LOADED)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "False"]


def test_set_the_sdks_are_installed(tmp_path):
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", SENTRY_DSN="http://k@127.0.0.1:9/1")
    done = django(env, LOADED)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["['opentelemetry.sdk.trace', 'sentry_sdk']", "True"]


@pytest.mark.parametrize(
    ("env", "sentence"),
    [
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
            "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL with a host, not 'collector:4318'.",
        ),
        (
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:43x18/v1/traces"},
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:// or https:// URL with a host, "
            "not 'http://collector:43x18/v1/traces'.",
        ),
        ({"SENTRY_DSN": "sentry.example/42"}, "SENTRY_DSN is not a Sentry DSN"),
        ({"SENTRY_DSN": "https://key@sentry.example:99x/42"}, "SENTRY_DSN is not a Sentry DSN"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:hunter2secret@collector:43x18"},
            "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL with a host, "
            "not 'https://user:***@collector:43x18'.",
        ),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: keel exports traces over OTLP/HTTP with protobuf only",
        ),
        (
            {"KEEL_TRACE_URL": "http://jaeger:16686/trace/"},
            "KEEL_TRACE_URL must say where the trace id goes ({trace_id}): 'http://jaeger:16686/trace'.",
        ),
    ],
)
def test_a_malformed_setting_stops_start_up_with_one_sentence(tmp_path, env, sentence):
    done = django(clean_env(tmp_path, **env), "pass")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: " + sentence), last


def test_the_api_and_the_page_name_the_trace(people, settings):
    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"})
    trace_id = runtime.trace_id_of(Execution.objects.get(pk=execution.pk))  # as read back: the same
    assert trace_id == runtime.trace_id_of(execution) and len(trace_id) == 32
    client = logged_in(people["requester"])
    assert client.get(f"/api/executions/{execution.ref}").json()["trace_id"] == trace_id
    page = client.get(f"/executions/{execution.ref}/").content.decode()
    assert trace_id not in page  # nothing configured: the page stays quiet
    settings.KEEL_TRACE_URL = "https://tempo.example/trace/{trace_id}?from=keel"
    page = client.get(f"/executions/{execution.ref}/").content.decode()
    assert f'href="https://tempo.example/trace/{trace_id}?from=keel"' in page
    # Another execution, another trace.
    other, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-09"})
    assert runtime.trace_id_of(other) != trace_id
