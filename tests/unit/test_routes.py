"""The step graph as pure logic: explicit edges (a route's successors, ``then``), the
path an execution takes from its recorded outputs, and edges checked at register."""

from __future__ import annotations

import pytest

from executions.authoring import END, Workflow
from executions.authoring.registry import register
from workflows import support_agent


def flow() -> Workflow:
    w = Workflow(name="routed", version=1, title="t", parse_input=dict, goal=lambda d: "g")
    w.step("first", label="First")(lambda ctx: {})
    w.route("pick", label="Pick", prompt_id="p", prompt_version="v", instruction=lambda c: "", to=["a", "b"])
    w.step("a", label="A", then=END)(lambda ctx: {})
    w.step("b", label="B", then="last")(lambda ctx: {})
    w.step("skipped", label="Skipped")(lambda ctx: {})
    w.step("last", label="Last")(lambda ctx: {})
    return w


def test_edges_follow_the_route_then_and_declaration_order():
    w = flow()
    assert w.next_step("first") == "pick"
    assert w.next_step("pick", {"route": "b"}) == "b"
    assert w.next_step("a") == "" and w.next_step("b") == "last" and w.next_step("last") == ""
    assert w.successors("pick") == ("a", "b") and w.successors("a") == ()
    with pytest.raises(KeyError):
        w.next_step("pick", {"route": "skipped"})  # never an undeclared edge


def test_the_path_follows_the_recorded_choice_and_stops_at_an_unmade_one():
    w = flow()
    assert [s.name for s in w.path({})] == ["first", "pick"]
    assert [s.name for s in w.path({"first": {}, "pick": {"route": "a"}})] == ["first", "pick", "a"]
    assert [s.name for s in w.path({"first": {}, "pick": {"route": "b"}})] == ["first", "pick", "b", "last"]


def test_an_edge_to_an_undeclared_step_is_refused_at_register():
    w = Workflow(name="broken_route", version=1, title="t", parse_input=dict, goal=lambda d: "g")
    w.route("pick", label="Pick", prompt_id="p", prompt_version="v", instruction=lambda c: "", to=["a", "nowhere"])
    w.step("a", label="A")(lambda ctx: {})
    with pytest.raises(ValueError, match="nowhere"):
        register(w)
    with pytest.raises(ValueError, match="two distinct"):
        w.route("again", label="x", prompt_id="p", prompt_version="v", instruction=lambda c: "", to=["a"])


def test_support_agent_v2_is_the_latest_and_its_branches_end_it():
    v2 = support_agent.flow_v2
    assert (v2.version, v2.first_step, v2.successors("route")) == (2, "route", ("resolve", "refund", "answer"))
    for branch in ("resolve", "refund", "answer"):
        assert v2.next_step(branch) == ""
    # The replace branch is version 1's agent step: the same tools, the same approval.
    assert v2.get_step("resolve").agent.tools == support_agent.flow.get_step("resolve").agent.tools
