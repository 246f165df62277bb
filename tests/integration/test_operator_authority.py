"""Who may use the triage console's new operations (issue 12): the resume preview, restart
from a step, closing a compensation — API and screens, as requester, manager, auditor,
anonymous and operator. Refusals write nothing; the operator's call works. The states
are test_edge's world (rows written directly: no processes are needed to ask who may)."""

from __future__ import annotations

import pytest
from django.test import Client

from executions.models import Action, Execution
from tests.support.records import snapshot
from tests.support.screens import logged_in

NOT_OPERATORS = ["requester", "manager", "auditor"]


def api(people, who: str | None, method: str, path: str, body: dict | None = None):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {people[who].token}"} if who else {}
    if method == "GET":
        return Client().get(path, **auth)
    return Client().post(path, body or {}, content_type="application/json", **auth)


def calls(world: dict) -> dict[str, tuple[str, str, dict | None, int]]:
    """name → (method, path, body, the operator's status)."""
    return {
        "preview": ("GET", f"/api/executions/{world['paused'].ref}/resume-preview", None, 200),
        "restart": (
            "POST",
            f"/api/executions/{world['failed'].ref}/restart",
            {"from_step": "publish", "reason": "the provider is back"},
            201,
        ),
        "close": (
            "POST",
            f"/api/actions/{world['compensation'].key}/close",
            {"outcome": "succeeded", "evidence": "retracted by hand"},
            200,
        ),
    }


@pytest.mark.parametrize("name", ["preview", "restart", "close"])
def test_the_api_answers_401_without_credentials_403_to_non_operators_and_serves_operators(people, world, name):
    method, path, body, ok = calls(world)[name]
    before = snapshot()
    assert api(people, None, method, path, body).status_code == 401
    for who in NOT_OPERATORS:
        answer = api(people, who, method, path, body)
        assert answer.status_code == 403, (who, answer.content)
        assert "operators" in answer.json()["detail"]
    assert snapshot() == before
    answer = api(people, "operator", method, path, body)
    assert answer.status_code == ok, answer.content


def test_unknown_ids_are_404_for_operators_and_403_for_others(people, world):
    for method, path, body in [
        ("GET", "/api/executions/RUN_9999/resume-preview", None),
        ("POST", "/api/executions/RUN_9999/restart", {"from_step": "publish", "reason": "x"}),
        ("POST", "/api/actions/RUN_9999:publish:v1:compensate/close", {"outcome": "failed", "evidence": "x"}),
    ]:
        assert api(people, "operator", method, path, body).status_code == 404, path
        assert api(people, "requester", method, path, body).status_code == 403, path


def test_the_preview_page_is_for_operators(people, world):
    ref = world["paused"].ref
    url = f"/executions/{ref}/resume/preview/"
    anonymous = Client().get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
    for who in NOT_OPERATORS:
        assert logged_in(people[who]).get(url).status_code == 403, who
    operator = logged_in(people["operator"])
    page = operator.get(url)
    assert page.status_code == 200 and 'id="confirm-resume"' in page.content.decode()
    assert operator.get("/executions/RUN_9999/resume/preview/").status_code == 404
    # The execution page's Resume leads there, for operators only.
    link = f'href="{url}"'
    assert link in operator.get(f"/executions/{ref}/").content.decode()
    assert link not in logged_in(people["requester"]).get(f"/executions/{ref}/").content.decode()


def test_the_restart_and_close_forms_are_for_operators(people, world):
    failed, compensation = world["failed"], world["compensation"]
    forms = {
        f"/executions/{failed.ref}/restart/": {"from_step": "publish", "reason": "the provider is back"},
        f"/executions/{compensation.execution.ref}/compensations/close/": {
            "key": compensation.key,
            "outcome": "failed",
            "evidence": "the publication can't be retracted",
        },
    }
    before = snapshot()
    for url, form in forms.items():
        anonymous = Client().post(url, form)
        assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
        for who in NOT_OPERATORS:
            page = logged_in(people[who]).post(url, form, follow=True).content.decode()
            assert "only operators" in page, who
    assert snapshot() == before
    # Only operators see the forms at all.
    for ref, form_id in [(failed.ref, 'id="restart-form"'), (compensation.execution.ref, 'class="close-form')]:
        assert form_id not in logged_in(people["manager"]).get(f"/executions/{ref}/").content.decode()
        assert form_id in logged_in(people["operator"]).get(f"/executions/{ref}/").content.decode()

    operator = logged_in(people["operator"])
    restarted = operator.post(f"/executions/{failed.ref}/restart/", forms[f"/executions/{failed.ref}/restart/"])
    new = Execution.objects.get(restarted_from=failed)
    assert restarted.status_code == 302 and restarted["Location"] == f"/executions/{new.ref}/"
    closed = operator.post(
        f"/executions/{compensation.execution.ref}/compensations/close/",
        forms[f"/executions/{compensation.execution.ref}/compensations/close/"],
        follow=True,
    )
    assert "Closed" in closed.content.decode()
    compensation.refresh_from_db()
    assert compensation.status == Action.State.FAILED and "can't be retracted" in compensation.last_error
