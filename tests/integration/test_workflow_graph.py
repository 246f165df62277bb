"""The workflow graph on the execution page (issue 39), from executions run by real
workers: a monthly report at its approval (the steps before it done, the gate current,
the effects after it not reached), redrawn by the page's poll once approved; and a
support ticket whose route chose one branch (the others skipped)."""

from __future__ import annotations

import re

from django.test import Client

from tests.support.stack import wait_status


def start_ticket(api, ticket: str) -> str:
    response = api.post("/executions", {"workflow": "support_agent", "input": {"ticket": ticket}})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def poll_url(html: str) -> str:
    return re.search(r'id="live-poll" hx-get="([^"]+)"', html).group(1).replace("&amp;", "&")


def page_of(person, ref: str) -> str:
    client = Client()
    client.force_login(person.user)
    response = client.get(f"/executions/{ref}/")
    assert response.status_code == 200
    return response.content.decode()


def node_states(html: str) -> dict[str, str]:
    """Each step's node in the page's SVG: name → data-state."""
    svg = html[html.index('<figure class="workflow-graph"') : html.index("</figure>")]
    return dict(re.findall(r'<g id="graph-step-(\w+)" data-state="(\w+)"', svg))


def node(html: str, step: str) -> str:
    start = html.index(f'<g id="graph-step-{step}"')
    return html[start : html.index("</g>", start)]


def test_a_monthly_report_at_its_approval_shows_the_steps_done_the_approval_current_and_the_rest_not_reached(
    stack, people, api_as
):
    stack.up()
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = requester.start("2026-08")["id"]
    waiting = wait_status(requester, ref, "awaiting_approval")

    html = page_of(people["requester"], ref)
    assert node_states(html) == {
        "retrieve_figures": "done",
        "analyze": "done",
        "draft_report": "done",
        "review": "parked",
        "publish": "not_reached",
        "notify": "not_reached",
    }
    assert "approval · awaiting approval · visit 1" in node(html, "review")
    title = re.search(r'<title id="workflow-graph-title">([^<]+)</title>', html).group(1)
    assert "6 steps: 3 done, 0 skipped, 2 not reached; at Awaiting manager approval" in title
    assert 'role="img" aria-labelledby="workflow-graph-title"' in html
    assert (
        '<li id="graph-item-review" data-state="parked">Awaiting manager approval (approval): awaiting approval' in html
    )

    # Approved, the page's poll brings the steps panel, and the graph with it, up to date.
    client = Client()
    client.force_login(people["requester"].user)
    url = poll_url(client.get(f"/executions/{ref}/").content.decode())
    assert manager.decide(ref, waiting["pending_approval"]).status_code == 202
    wait_status(requester, ref, "completed")
    answer = client.get(url, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200
    body = answer.content.decode()
    assert node_states(body) == dict.fromkeys(
        ["retrieve_figures", "analyze", "draft_report", "review", "publish", "notify"], "done"
    )
    assert '<g id="graph-end" data-state="done">' in body


def test_a_routed_ticket_shows_the_branches_the_route_did_not_choose_as_skipped(stack, people, api_as):
    stack.up()
    requester = api_as(people["requester"])
    ref = start_ticket(requester, "TCK-1005")  # the offline model routes it to "answer"
    wait_status(requester, ref, "completed")

    html = page_of(people["operator"], ref)
    assert node_states(html) == {"route": "done", "resolve": "skipped", "refund": "skipped", "answer": "done"}
    assert "route · done" in node(html, "route")
    chosen = re.search(
        r'<path id="graph-edge-\d+" data-source="route" data-target="answer"[^>]*data-taken="(\w+)"', html
    )
    skipped = re.search(
        r'<path id="graph-edge-\d+" data-source="route" data-target="refund"[^>]*data-taken="(\w+)"', html
    )
    assert chosen.group(1) == "true" and skipped.group(1) == "false"
    assert (
        "Refunding the broken items (agent): skipped; Choosing how to handle the ticket chose Answering the customer"
        in html
    )
