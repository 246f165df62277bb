"""The workflow graph of the execution page (console/graph.py) as pure logic, on the
shipped workflows: nodes in declared order, a route's branches, a children step's
count, the way back when changes are requested, each step's state and visit from a
``Progress``, lanes that never overlap, and the SVG's text escaped."""

from __future__ import annotations

import re

from django.template.loader import render_to_string

from console import graph
from console.graph import NodeState, Progress
from executions.authoring import END, Workflow, registry
from executions.models import Status


def states(g: graph.Graph) -> dict[str, tuple[str, int]]:
    return {n.name: (n.state, n.visit) for n in g.nodes}


def edges(g: graph.Graph) -> dict[tuple[str, str], graph.Edge]:
    return {(e.source, e.target): e for e in g.edges}


def monthly() -> Workflow:
    return registry.get("monthly_report", 1)


def test_the_plan_alone_lays_out_the_steps_in_order_with_the_way_back_from_the_approval():
    g = graph.layout(monthly())
    assert [n.name for n in g.nodes] == ["retrieve_figures", "analyze", "draft_report", "review", "publish", "notify"]
    assert {n.state for n in g.nodes} == {NodeState.NOT_REACHED}
    assert [n.kind for n in g.nodes] == ["compute", "model", "compute", "approval", "effect", "effect"]
    assert [n.marker for n in g.nodes][2:4] == ["circle", "square"]
    by = edges(g)
    assert [by[(a, b)].kind for a, b in [("retrieve_figures", "analyze"), ("review", "publish"), ("notify", END)]] == [
        "next"
    ] * 3
    back = by[("review", "analyze")]  # redraft_from="analyze"
    assert back.kind == "changes" and back.label == "changes requested" and not back.taken
    assert "changes requested: back to Analyzing performance" in g.nodes[3].leads_to
    ys = [n.y for n in g.nodes]
    assert ys == sorted(ys) and len(set(ys)) == len(ys) and g.end_y > ys[-1]
    assert g.nodes[0].x > 0 and g.width >= g.nodes[0].x + graph.NODE_W  # the lane on the left fits


def test_a_monthly_report_at_its_approval_shows_the_steps_done_the_gate_parked_and_the_rest_not_reached():
    done = {"retrieve_figures": {}, "analyze": {}, "draft_report": {"report_version": 1}}
    progress = Progress(
        status=Status.AWAITING_APPROVAL,
        current="review",
        succeeded={name: frozenset({1}) for name in done},
        outputs=done,
    )
    g = graph.layout(monthly(), progress)
    assert states(g) == {
        "retrieve_figures": (NodeState.DONE, 1),
        "analyze": (NodeState.DONE, 1),
        "draft_report": (NodeState.DONE, 1),
        "review": (NodeState.PARKED, 1),
        "publish": (NodeState.NOT_REACHED, 0),
        "notify": (NodeState.NOT_REACHED, 0),
    }
    review = g.nodes[3]
    assert review.words == "awaiting approval" and review.meta == "approval · awaiting approval · visit 1"
    assert edges(g)[("draft_report", "review")].taken and not edges(g)[("review", "publish")].taken
    assert "at Awaiting manager approval (awaiting approval, visit 1)" in g.summary
    assert "3 done, 0 skipped, 2 not reached" in g.summary


def test_changes_requested_runs_the_analysis_again_on_its_second_visit():
    """Round 2 after "request changes": back at analyze; the draft will run again."""
    done = {"retrieve_figures": {}, "analyze": {}, "draft_report": {"report_version": 1}}
    progress = Progress(
        status=Status.RUNNING,
        current="analyze",
        round=2,
        succeeded={name: frozenset({1}) for name in done},
        outputs=done,
    )
    g = graph.layout(monthly(), progress)
    assert states(g) == {
        "retrieve_figures": (NodeState.DONE, 1),
        "analyze": (NodeState.CURRENT, 2),
        "draft_report": (NodeState.NOT_REACHED, 1),
        "review": (NodeState.NOT_REACHED, 0),
        "publish": (NodeState.NOT_REACHED, 0),
        "notify": (NodeState.NOT_REACHED, 0),
    }
    assert "done 1× before, runs again" in g.nodes[2].notes
    assert edges(g)[("review", "analyze")].taken  # the way back was taken


def test_an_approval_asked_again_in_a_new_round_keeps_the_steps_before_it_done():
    """An expired request asked again is round 2 at the gate: nothing before it runs again."""
    done = {"retrieve_figures": {}, "analyze": {}, "draft_report": {}}
    progress = Progress(
        status=Status.AWAITING_APPROVAL,
        current="review",
        round=2,
        succeeded={name: frozenset({1}) for name in done},
        outputs=done,
    )
    g = graph.layout(monthly(), progress)
    assert [s for s, _ in states(g).values()][:4] == [NodeState.DONE] * 3 + [NodeState.PARKED]


def test_a_route_shows_its_choice_and_the_branches_not_taken_as_skipped():
    flow = registry.get("support_agent", 2)
    outputs = {"route": {"route": "answer", "why": "a question"}, "answer": {}}
    progress = Progress(
        status=Status.COMPLETED,
        current="",
        succeeded={"route": frozenset({1}), "answer": frozenset({1})},
        outputs=outputs,
    )
    g = graph.layout(flow, progress)
    assert states(g) == {
        "route": (NodeState.DONE, 1),
        "resolve": (NodeState.SKIPPED, 0),
        "refund": (NodeState.SKIPPED, 0),
        "answer": (NodeState.DONE, 1),
    }
    assert g.nodes[0].marker == "diamond" and "chose Answering the customer" in g.nodes[0].notes
    assert "Choosing how to handle the ticket chose Answering the customer" in g.nodes[1].notes
    by = edges(g)
    assert by[("route", "answer")].taken and by[("route", "answer")].label == "chosen"
    assert not by[("route", "resolve")].taken and not by[("route", "refund")].taken
    assert {by[("route", t)].kind for t in ("refund", "answer")} == {"jump"}
    assert by[("resolve", END)].kind == "jump" and by[("answer", END)].kind == "next"
    assert g.completed and "completed" in g.summary


def test_before_the_route_chooses_every_branch_is_still_ahead():
    flow = registry.get("support_agent", 2)
    g = graph.layout(flow, Progress(status=Status.RUNNING, current="route"))
    assert states(g)["route"] == (NodeState.CURRENT, 1)
    assert {states(g)[b][0] for b in ("resolve", "refund", "answer")} == {NodeState.NOT_REACHED}


def test_lanes_never_share_a_stretch():
    """The route's jumps and the branches' ways to the end each keep a lane where they overlap."""
    g = graph.layout(registry.get("support_agent", 2))
    lanes = {}
    for e in g.edges:
        if e.kind == "jump":
            lane = float(re.match(r"M[\d.]+ [\d.]+ H([\d.]+)", e.d).group(1))
            lanes[(e.source, e.target)] = lane
    assert lanes[("route", "refund")] != lanes[("route", "answer")]
    assert lanes[("resolve", END)] != lanes[("route", "answer")]  # both pass the refund node
    assert max(lanes.values()) < g.width


def test_a_children_step_waiting_shows_how_many_children_and_their_statuses():
    flow = registry.get("quarterly_report", 1)
    progress = Progress(
        status=Status.WAITING,
        current="monthly_reports",
        children={"monthly_reports": ("completed", "running", "completed")},
    )
    g = graph.layout(flow, progress)
    node = g.nodes[0]
    assert (node.state, node.words, node.visit, node.marker) == (
        NodeState.PARKED,
        "waiting for its children",
        1,
        "square",
    )
    assert "3 children: 2 completed, 1 running" in node.notes
    assert "3 children: 2 completed, 1 running" in node.sentence
    assert [s for s, _ in states(g).values()][1:] == [NodeState.NOT_REACHED] * 4


def test_a_failed_or_retrying_step_says_so_and_what_follows_was_not_reached():
    done = {name: {} for name in ("retrieve_figures", "analyze", "draft_report", "review")}
    base = {"current": "publish", "succeeded": {n: frozenset({1}) for n in done}, "outputs": done}
    failed = graph.layout(monthly(), Progress(status=Status.FAILED, **base))
    assert states(failed)["publish"] == (NodeState.FAILED, 1) and states(failed)["notify"][0] == NodeState.NOT_REACHED
    retrying = graph.layout(monthly(), Progress(status=Status.RETRY_PENDING, failed_attempts=2, **base))
    assert retrying.nodes[4].words == "retrying after 2 failed attempts"
    attention = graph.layout(monthly(), Progress(status=Status.NEEDS_ATTENTION, **base))
    assert states(attention)["publish"] == (NodeState.ATTENTION, 1)


def test_a_step_an_edge_jumps_over_is_skipped_and_an_edge_back_takes_a_left_lane():
    w = Workflow(name="looping", version=1, title="t", parse_input=dict, goal=lambda d: "g")
    w.step("ask", label="Ask")(lambda ctx: {})
    w.step("answer", label="Answer", then="close")(lambda ctx: {})
    w.step("escalate", label="Escalate")(lambda ctx: {})
    w.step("close", label="Close", then="ask")(lambda ctx: {})
    outputs = {"ask": {}, "answer": {}}
    progress = Progress(
        status=Status.RUNNING,
        current="close",
        succeeded={"ask": frozenset({1}), "answer": frozenset({1})},
        outputs=outputs,
    )
    g = graph.layout(w, progress)
    assert states(g)["escalate"] == (NodeState.SKIPPED, 0)
    back = edges(g)[("close", "ask")]
    assert back.kind == "back" and back.d.startswith(f"M{g.nodes[0].x} ")
    assert edges(g)[("answer", "close")].kind == "jump"


def test_the_svg_escapes_labels_is_an_image_with_a_summary_and_lists_the_same_facts():
    w = Workflow(name="escaping", version=1, title="t", parse_input=dict, goal=lambda d: "g")
    w.step("one", label='<script>alert("x")</script> & more')(lambda ctx: {})
    w.step("two", label="Two")(lambda ctx: {})
    g = graph.layout(
        w, Progress(status=Status.RUNNING, current="two", succeeded={"one": frozenset({1})}, outputs={"one": {}})
    )
    html = render_to_string("executions/_graph.html", {"graph": g})
    assert "<script>" not in html and "&lt;script&gt;" in html and "&amp; more" in html
    svg = re.search(r"<svg[^>]*>", html).group(0)
    assert 'role="img"' in svg and 'aria-labelledby="workflow-graph-title"' in svg and "viewBox=" in svg
    assert re.search(r'<title id="workflow-graph-title">Workflow graph of escaping v1, 2 steps: 1 done', html)
    assert re.findall(r'<g id="graph-step-(\w+)" data-state="(\w+)"', html) == [("one", "done"), ("two", "current")]
    assert len(re.findall(r'<li id="graph-item-', html)) == 2 and "style=" not in html
    assert render_to_string("executions/_graph.html", {"graph": None}).strip() == ""


def test_every_shipped_workflow_lays_out_as_a_plan():
    """A branch (support_chat's ``turn``) and a wait's timeout (its ``next``) are edges too:
    the graph of a workflow with either was dropped from the page (a KeyError)."""
    for name in registry.names():
        for flow in [registry.get(name, v) for v in registry.versions(name)]:
            assert graph.layout(flow).nodes, flow.name


def test_a_chat_that_went_round_twice_shows_its_branch_both_ways_and_the_timeout_not_taken():
    flow = registry.get("support_chat", 1)
    outputs = {
        "answer": {"answer": "…"},
        "next": {"timed_out": False, "payload": {"text": "close"}},
        "turn": {"next": "finish"},
        "finish": {},
    }
    succeeded = {
        "answer": frozenset({1, 2}),
        "next": frozenset({1, 2}),
        "turn": frozenset({1, 2}),
        "finish": frozenset({2}),
    }
    g = graph.layout(flow, Progress(status=Status.COMPLETED, current="", round=2, succeeded=succeeded, outputs=outputs))
    by = edges(g)
    assert by[("turn", "finish")].taken and by[("turn", "finish")].label == "chosen"
    assert by[("turn", "answer")].taken, "the first visit went round again"
    assert by[("next", "finish")].label == "on timeout" and not by[("next", "finish")].taken
    assert by[("next", "turn")].taken
    assert states(g)["answer"] == (NodeState.DONE, 2)
