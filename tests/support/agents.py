"""What the agent tests share (tests/scenarios/test_agents.py and the tests built on the
support agent): a worker's environment for each model provider against the sandbox, a
support ticket started, the journal read, the sandbox's provider counts."""

from __future__ import annotations

from executions.authoring.testing.processes import provider_env

PROVIDER_ENDPOINTS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def model_env(stack, provider: str = "openai") -> dict[str, str]:
    """The worker's environment for ``provider`` (offline, openai, anthropic) against the sandbox."""
    return provider_env(provider, stack.sandbox_url)


def start_ticket(api, ticket: str = "TCK-1001") -> str:
    response = api.post("/executions", {"workflow": "support_agent", "input": {"ticket": ticket}})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def approved_document(api, approval: dict) -> bytes:
    response = api.get(f"/artifacts/{approval['artifact_id']}/versions/{approval['artifact_version']}/content")
    assert response.status_code == 200, response.text
    assert response.headers["X-Content-SHA256"] == approval["content_sha256"]
    return response.content


def model_calls(api, ref: str, step: str | None = None) -> list[dict]:
    """The journal of ``ref`` (only ``step``'s calls when given)."""
    response = api.get(f"/executions/{ref}/model-calls")
    assert response.status_code == 200, response.text
    return [c for c in response.json()["items"] if step is None or c["step"] == step]


VARIANTS = "workflows.monthly_report,workflows.support_agent,tests.support.agent_variants"


def provider_calls(stack, provider: str) -> int:
    return stack.sandbox_stats()["endpoints"].get(PROVIDER_ENDPOINTS[provider], {}).get("calls", 0)
