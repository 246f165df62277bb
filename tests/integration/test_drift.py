"""Issue 17, item 4: model drift has a way out. S28's situation — the support agent's
prompt template edited under an execution waiting for its approval — then an operator
reads the diff of the recorded and the rebuilt request and accepts the new request:
the model is asked again from that call on (the old records kept, superseded), the
approved order goes out once, and the execution completes. Before accepting, the
preview says a resume would stop again; a resume does, and calls nothing.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from executions.models import Action, ModelCall
from tests.support.agents import model_env, start_ticket
from tests.support.cli import keel, refused
from tests.support.stack import app_env, pk, wait_status

EDITED = "workflows.monthly_report,workflows.support_agent,tests.support.support_agent_edited"


def drifted(stack, people, api_as) -> str:
    """A support-agent execution stopped at model_drift by the edited prompt (S28)."""
    stack.sandbox()
    stack.beat()
    stack.web()
    env = model_env(stack, "anthropic")
    first = stack.worker("v1", **env)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start_ticket(requester)
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    first.stop()
    stack.worker("edited", RUNTIME_WORKFLOW_MODULES=EDITED, **env)
    assert manager.decide(ref, approval).status_code == 202
    stopped = wait_status(requester, ref, "needs_attention")
    assert stopped["stuck"]["reason"] == "model_drift" and stopped["stuck"]["action"] == "resolve"
    return ref


@pytest.mark.own_stack  # it stops the worker and starts one with the edited prompt
def test_an_operator_accepts_the_new_request_and_the_agent_goes_on_once(stack, people, api_as, tmp_path):
    ref = drifted(stack, people, api_as)
    operator = api_as(people["operator"])
    key = f"{ref}:resolve:r1:c1"
    recorded = ModelCall.objects.get(key=key)

    # The preview says what a resume would do: stop again at the same call, calling nothing.
    preview = operator.get(f"/executions/{ref}/resume-preview").json()
    [resolve] = [s for s in preview["steps"] if s["step"] == "resolve"]
    assert f"stops again at {key} without calling the model" in resolve["why"]
    before = stack.sandbox_stats()["endpoints"]["/v1/messages"]["calls"]
    assert operator.post(f"/executions/{ref}/resume", {"reason": "try as it is"}).status_code == 200
    wait_status(operator, ref, "needs_attention")
    assert stack.sandbox_stats()["endpoints"]["/v1/messages"]["calls"] == before

    # The page shows the two requests side by side: the edited instruction is the change.
    page = Client()
    page.force_login(people["operator"].user)
    text = page.get(f"/executions/{ref}/").content.decode()
    diff = text[text.index('id="drift-diff"') : text.index("</pre>", text.index('id="drift-diff"'))]
    assert 'class="diff-del"' in diff and 'class="diff-add"' in diff
    assert "kindly and quickly" in diff.split('class="diff-add"', 1)[1]
    assert 'id="accept-request-form"' in text

    # Accepting binds to the request shown: another hash, or no reason, is refused.
    rebuilt = ModelCall.objects.get(key=key).request_sha256  # the recorded one: not what was rebuilt
    wrong = operator.post(f"/executions/{ref}/accept-request", {"key": key, "request_sha256": rebuilt, "reason": "x"})
    assert wrong.status_code == 409 and wrong.json()["key"] == key
    shown = wrong.json()["request_sha256"]
    no_reason = operator.post(f"/executions/{ref}/accept-request", {"key": key, "request_sha256": shown})
    assert no_reason.status_code == 422 and no_reason.json()["detail"][0]["loc"] == ["body", "reason"]
    assert (
        api_as(people["requester"])
        .post(f"/executions/{ref}/accept-request", {"key": key, "request_sha256": shown, "reason": "x"})
        .status_code
        == 403
    )

    # From a shell (keel accept-request, the same service): without the key and the hash it
    # shows them and accepts nothing; with the recorded hash it is refused; with the shown one it goes on.
    cli = app_env(tmp_path)
    refused(keel(cli, "accept-request", ref, "--reason", "x", "--as", "operator"), 2, key, shown)
    refused(keel(cli, "accept-request", ref, "--key", key, "--sha256", rebuilt, "--reason", "x", "--as", "operator"), 3)
    assert ModelCall.objects.filter(key=key).count() == 1
    accepted = keel(
        cli, "accept-request", ref, "--key", key, "--sha256", shown,
        "--reason", "the friendlier instruction is the intended deploy", "--as", "operator", "--json",
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["id"] == ref
    wait_status(operator, ref, "completed")

    items = operator.get(f"/executions/{ref}/model-calls").json()["items"]
    calls = [c for c in items if c["step"] == "resolve"]  # support_agent v2's route call is not part of the drift
    revised = [c for c in calls if c["revision"] == 2]
    assert [c["seq"] for c in revised] == [1, 2, 3, 4], "asked again from the accepted call on"
    assert all(c["superseded"] for c in calls if c["revision"] == 1 and c["seq"] <= 4)
    assert not any(c["superseded"] for c in calls if c["revision"] == 2)
    assert ModelCall.objects.get(key=key, revision=1).request_sha256 == recorded.request_sha256, "kept as it was"
    assert ModelCall.objects.get(key=key, revision=2).request_sha256 == shown
    stats = stack.sandbox_stats()
    assert stats["keys"][f"{key}:rev2"]["calls"] == 1
    [order] = Action.objects.filter(execution_id=pk(ref), type="submit_replacement")
    assert stats["keys"][order.key]["effects"] == 1 and stats["endpoints"]["/orders"]["effects"] == 1

    acts = operator.get(f"/operator-audit?execution={ref}").json()["items"]
    assert [a["action"] for a in acts if a["action"] in ("accept_request", "resume")] == ["accept_request", "resume"]
