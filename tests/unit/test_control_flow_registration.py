"""Registration refuses what can't run (docs/design.md §6, control flow; issue 40 item 7): at
import, one sentence naming the workflow and the step. And the edges the new control
flow adds (branch, on_timeout, on_reject) lead where their recorded output says."""

from __future__ import annotations

import pytest

from approvals.gate import Approval
from executions.authoring import END, Effect, Workflow


def flow() -> Workflow:
    return Workflow(name="w", version=1, title="W")


def refused(workflow: Workflow) -> str:
    with pytest.raises(ValueError) as caught:
        workflow.check_edges()
    return str(caught.value)


def test_an_edge_to_an_undeclared_step_is_refused_naming_it():
    w = flow()
    w.step("a", label="A", then="nowhere")(lambda ctx: {})
    assert refused(w) == "w v1: a leads to ['nowhere'], not steps of it"


def test_a_step_nothing_reaches_is_refused():
    w = flow()
    w.step("a", label="A", then=END)(lambda ctx: {})
    w.step("orphan", label="Orphan")(lambda ctx: {})
    assert refused(w) == (
        "w v1: nothing leads to orphan from a (a step without then= goes on to the step declared after it)"
    )


def test_a_gate_whose_rejection_step_is_declared_next_is_told_how_steps_go_on():
    # Found porting a workflow as a user would: the gate's success path went on to the
    # rejection's step declared after it, so the effect after that was unreachable.
    w = flow()
    w.step("draft", label="Draft")(lambda ctx: {})
    w.gate("approve", label="Approve", spec=Approval(artifact="doc", action="pay", on_reject="redraft"))
    w.step("redraft", label="Redraft", then="draft")(lambda ctx: {})
    w.effect("pay", label="Pay", action="pay", guarded_by="approve")(lambda ctx: None)
    assert refused(w).endswith(
        "nothing leads to pay from draft (a step without then= goes on to the step declared after it)"
    )


def test_a_guarded_effect_a_branch_reaches_around_its_gate_is_refused():
    w = flow()
    w.step("draft", label="Draft")(lambda ctx: {})
    w.branch("how", label="How", to=["review", "pay"])(lambda ctx: "pay")
    w.gate("review", label="Review", spec=Approval(artifact="doc", action="pay"))
    w.effect("pay", label="Pay", action="pay", guarded_by="review")(lambda ctx: None)
    assert refused(w) == "w v1: pay is guarded by review, but a path from draft reaches it without passing review"


def test_a_reject_or_timeout_to_an_undeclared_step_is_refused():
    w = flow()
    w.step("draft", label="Draft")(lambda ctx: {})
    w.gate("review", label="Review", spec=Approval(artifact="doc", action="pay", on_reject="rejected"))
    assert refused(w) == "w v1: review leads to ['rejected'], not steps of it"
    w = flow()
    w.wait("hold", label="Hold", signal="go", timeout=5, on_timeout="later")
    assert refused(w) == "w v1: hold leads to ['later'], not steps of it"


@pytest.mark.parametrize("seconds", [0, -1, "5", None, True])
def test_a_sleep_or_wait_of_no_positive_seconds_is_refused_naming_it(seconds):
    with pytest.raises(ValueError, match="nap's seconds must be a positive number of seconds"):
        flow().sleep("nap", label="Nap", seconds=seconds)
    with pytest.raises(ValueError, match="hold's timeout must be a positive number of seconds"):
        flow().wait("hold", label="Hold", signal="go", timeout=seconds)


@pytest.mark.parametrize("to", [["one"], ["a", "a"], []])
def test_a_branch_needs_two_distinct_targets(to):
    with pytest.raises(ValueError, match="branch how needs at least two distinct steps"):
        flow().branch("how", label="How", to=to)


def test_the_new_edges_follow_the_recorded_output():
    w = flow()
    w.branch("how", label="How", to=["wait", "review"])(lambda ctx: "wait")
    w.wait("wait", label="Wait", signal="go", timeout=5, on_timeout="late")
    w.step("went", label="Went", then=END)(lambda ctx: {})
    w.step("late", label="Late", then=END)(lambda ctx: {})
    w.step("draft", label="Draft")(lambda ctx: {})
    w.gate("review", label="Review", spec=Approval(artifact="doc", action="send", on_reject="rejected"))
    w.effect("send", label="Send", action="send", guarded_by="review", then=END)(
        lambda ctx: Effect(key="k", args={}, call=lambda a, k: {})
    )
    w.step("rejected", label="Rejected")(lambda ctx: {})
    with pytest.raises(ValueError, match="nothing leads to draft"):
        w.check_edges()

    assert w.next_step("how", {"next": "review"}) == "review"
    assert w.next_step("how", {"next": END}) == END
    with pytest.raises(KeyError, match="branch how chose 'elsewhere'"):
        w.next_step("how", {"next": "elsewhere"})
    assert w.next_step("wait", {"timed_out": True}) == "late"
    assert w.next_step("wait", {"timed_out": False, "payload": {}}) == "went"
    assert w.next_step("review", {"decision": "reject"}) == "rejected"
    assert w.next_step("review", {"decision": "approve"}) == "send"
    assert set(w.successors("wait")) == {"went", "late"}
    # The path stops where a choice isn't recorded yet.
    assert [s.name for s in w.path({"how": {"next": "wait"}})] == ["how", "wait"]


def test_every_step_that_does_not_choose_takes_then():
    """A loop back from a wait, a sleep, a model step or a fan-out needs no step of its own
    in between (found porting a workflow: a wait had to go on through a step that did
    nothing but say where to go)."""
    w = flow()
    w.model_step("think", label="Think", prompt_version="t1", then="nap")(lambda ctx, model: {})
    w.step("unused_order", label="Declared after think, reached by ask", then=END)(lambda ctx: {})
    w.sleep("nap", label="Nap", seconds=5, then="kids")
    w.children("kids", label="Kids", then="ask")(lambda ctx: [])
    w.wait("ask", label="Ask", signal="more", timeout=60, on_timeout="unused_order", then="think")
    w.check_edges()  # every step reached (unused_order by the timeout alone)
    assert w.next_step("think", {}) == "nap"
    assert w.next_step("nap", {"timed_out": True, "payload": {}}) == "kids"  # a sleep always "times out"
    assert w.next_step("kids", {}) == "ask"
    assert w.next_step("ask", {"timed_out": False, "payload": {}}) == "think"
    assert w.next_step("ask", {"timed_out": True}) == "unused_order"
    assert set(w.successors("ask")) == {"think", "unused_order"}


def test_on_reject_on_a_tools_approval_is_refused():
    from executions.authoring import Tool, ToolArgs

    class Args(ToolArgs):
        n: int

    tool = Tool(
        name="pay",
        description="Pays.",
        args=Args,
        run=lambda a, p, k: None,
        effect=True,
        approval=Approval(artifact="pay", action="pay", on_reject="sorry"),
    )
    with pytest.raises(ValueError, match="tool pay can't take on_reject"):
        flow().agent("a", label="A", prompt_id="p", prompt_version="v", instruction=lambda c: "", tools=[tool])


def test_an_effect_guarded_by_a_gate_that_approves_another_action_is_refused():
    # Found porting Temporal's money transfer as a user would: the manager allowed
    # "pay_money" and "something_else" ran through the gate.
    w = flow()
    w.step("draft", label="Draft")(lambda ctx: {})
    w.gate("approve", label="Approve", spec=Approval(artifact="transfer", action="pay_money"))
    with pytest.raises(ValueError) as caught:
        w.effect("send", label="Send", action="something_else", guarded_by="approve")(
            lambda ctx: Effect(key="k", args={}, call=lambda a, k: {})
        )
    assert str(caught.value) == (
        "w v1: send does 'something_else', but its gate approve asks the approver to allow 'pay_money': "
        "name the same action in both (the approver allows what runs)"
    )
    w.effect("pay", label="Pay", action="pay_money", guarded_by="approve")(
        lambda ctx: Effect(key="k", args={}, call=lambda a, k: {})
    )


def test_an_effects_on_failure_to_an_undeclared_step_is_refused():
    w = flow()
    w.effect("pay", label="Pay", action="pay", on_failure="refnud")(
        lambda ctx: Effect(key="k", args={}, call=lambda a, k: {})
    )
    assert refused(w) == "w v1: pay leads to ['refnud'], not steps of it"


def test_an_effects_on_failure_must_name_a_step_and_only_the_runtimes_failure_takes_it():
    from executions.authoring.workflow import failed_for_good

    w = flow()
    with pytest.raises(ValueError, match="pay's on_failure must name a step"):
        w.effect("pay", label="Pay", action="pay", on_failure=END)
    w.effect("pay", label="Pay", action="pay", on_failure="refund")(
        lambda ctx: Effect(key="k", args={}, call=lambda a, k: {})
    )
    w.step("done", label="Done", then=END)(lambda ctx: {})
    w.step("refund", label="Refund")(lambda ctx: {})
    went = {"failed": {"kind": "invalid_input", "error": "closed", "attempt": 1}}
    assert failed_for_good(went) and w.next_step("pay", went) == "refund"
    assert w.next_step("pay", {"failed": {"count": 0}, "id": "R-1"}) == "done"  # a receipt
    assert not w.get_step("pay").chooses  # what lies ahead of it is its usual edge
