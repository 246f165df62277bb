"""The Content-Security-Policy on every HTML page: pages, partials, error pages, the admin."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings
from django.urls import include, path
from playwright.sync_api import expect

from config.csp import DEFAULT_POLICY, HEADER, header_value
from tests.support.browsing import login
from tests.support.screens import POLICY, logged_in, make_gate


def crash(request):
    raise RuntimeError("a bug in a view")


urlpatterns = [path("crash/", crash), path("", include("config.urls"))]


def test_the_policy_is_the_strict_one():
    assert header_value(DEFAULT_POLICY) == POLICY
    assert "unsafe" not in POLICY  # no 'unsafe-inline', no 'unsafe-eval'


def test_every_html_page_and_partial_carries_the_policy(people):
    request = make_gate(people)
    ref, version = request.execution.ref, request.artifact_version
    pages = {
        "manager": [
            "/",
            f"/executions/{ref}/",
            f"/executions/{ref}/live/?part=panels",
            f"/executions/{ref}/status-cell/",
            "/approvals/inbox/",
            "/approvals/inbox/count/",
            f"/approvals/{request.pk}/",
            f"/approvals/{request.pk}/state/",
            f"/artifacts/{version.artifact.ref}/v{version.number}/",
            "/executions/RUN_9999/",  # 404
            "/approvals/audit/",  # 403
        ],
        "auditor": ["/approvals/audit/", f"/approvals/audit/{request.pk}/"],
    }
    for who, urls in pages.items():
        client = logged_in(people[who])
        for url in urls:
            response = client.get(url)
            assert response["Content-Type"].startswith("text/html"), url
            assert response[HEADER] == POLICY, url
    anonymous = Client()
    for url in ("/login/", "/admin/login/", "/api/docs"):
        response = anonymous.get(url)
        assert response.status_code == 200 and response[HEADER] == POLICY, url


def test_json_and_raw_bytes_keep_their_own_headers(people):
    request = make_gate(people)
    client = logged_in(people["manager"])
    version = request.artifact_version
    raw = client.get(f"/artifacts/{version.artifact.ref}/v{version.number}/raw")
    assert raw.status_code == 200 and raw[HEADER] == "sandbox"  # model bytes never run as our page
    api = client.get(f"/api/executions/{request.execution.ref}")
    assert api.status_code == 200 and HEADER not in api


@override_settings(ROOT_URLCONF=__name__)
@pytest.mark.django_db
def test_the_server_error_page_carries_the_policy():
    response = Client(raise_request_exception=False).get("/crash/")
    assert response.status_code == 500 and response[HEADER] == POLICY


@pytest.mark.browser
def test_our_pages_run_under_the_policy_without_a_violation(live_server, people, browser):
    """Chromium reports no CSP violation on the pages, the admin's login and the API docs:
    htmx, the page script, styles and Swagger UI all come from our origin."""
    request = make_gate(people)
    base = live_server.url
    context = browser.new_context()
    page = context.new_page()
    violations = []
    page.on(
        "console", lambda m: violations.append(f"{page.url}: {m.text}") if "Content Security Policy" in m.text else None
    )
    page.goto(f"{base}/api/docs")
    expect(page.locator("#swagger-ui .opblock").first).to_be_visible(timeout=15_000)
    page.goto(f"{base}/admin/login/")
    expect(page.locator("#id_username")).to_be_visible()
    login(page, base, people["manager"])
    for url in (
        "/",
        f"/executions/{request.execution.ref}/",
        f"/approvals/{request.pk}/",
        f"/artifacts/{request.artifact_version.artifact.ref}/v2/",
        "/approvals/inbox/",
        "/executions/RUN_9999/",
    ):
        page.goto(f"{base}{url}")
        page.wait_for_timeout(300)  # a poll or two
    assert violations == []
    context.close()
