"""Issue 17, Low items about agents, on real processes (the offline model): the steps
panel says the agent step is in progress with its calls and results instead of "No
step has run yet"; each tool result is on the timeline; the tool-call approval shows
what the agent read (the ticket, the order, the stock) beside the arguments; every
model step's timeline line names its prompt version (never "prompt ?").
"""

from __future__ import annotations

from django.test import Client

from tests.support.agents import start_ticket
from tests.support.stack import wait_status


def page_for(person) -> Client:
    client = Client()
    client.force_login(person.user)
    return client


def test_an_agent_parked_at_its_approval_shows_what_it_did_and_read(stack, people, api_as):
    stack.up(beat=False)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start_ticket(requester)
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    report = requester.start("2026-08")["id"]

    page = page_for(people["operator"]).get(f"/executions/{ref}/").content.decode()
    steps = page[page.index('id="steps-card"') : page.index('id="model-calls-card"')]
    assert "No step has run yet" not in steps
    assert "Replacing the broken items: in progress — 4 model calls and 3 tool results so far" in steps, steps
    timeline = page[page.index('id="timeline-card"') : page.index('id="approvals-card"')]
    for tool in ("get_ticket", "lookup_order", "check_stock"):
        assert f"Tool result: {tool}" in timeline, tool
    assert "TCK-1001" in timeline  # the arguments and the result are there

    shown = page_for(people["manager"]).get(f"/approvals/{approval['id']}/").content.decode()
    reads = shown[shown.index('id="agent-reads"') : shown.index("</section>", shown.index('id="agent-reads"'))]
    assert [t for t in ("get_ticket", "lookup_order", "check_stock") if f">{t}</code>" in reads] == [
        "get_ticket",
        "lookup_order",
        "check_stock",
    ]
    assert reads.index(">get_ticket<") < reads.index(">lookup_order<") < reads.index(">check_stock<")
    assert "ORD-1001" in reads and "SKU-MUG-01" in reads  # the order and the stock the quantity is judged by

    assert manager.decide(ref, approval).status_code == 202
    wait_status(requester, ref, "completed")
    done = page_for(people["operator"]).get(f"/executions/{ref}/").content.decode()
    assert "prompt support-agent-v2" in done and "prompt ?" not in done
    wait_status(requester, report, "awaiting_approval")
    drafted = page_for(people["operator"]).get(f"/executions/{report}/").content.decode()
    assert "prompt monthly-analysis-v1" in drafted and "prompt ?" not in drafted
