"""Hypothesis strategies for fuzz cases (``specs``): ``cases()``.

Every choice lists its simplest value first, so a failing case shrinks towards fewer
blocks, computes rather than effects, one start, one worker, no kill, no duplicate and
providers that de-duplicate. A kill names a failpoint at a step the case renders; a
fault names a provider the case calls. The order service's mode is drawn first: an
effect there claims the provider honours its key only when it does.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from .specs import Act, Agent, Approve, Case, Children, Compute, Flow, Kill, Schedule, Wait, steps_of

# Shapes a run may leave out while the bug they find is known and being fixed (FUZZ_AVOID).
AVOIDABLE = {
    "empty_children": "a children step that starts none (S50)",
    "agent_repeats": "an agent proposing its approved tool call again (S49)",
}
MAX_MAIN_BLOCKS = 5
MAX_CHILD_BLOCKS = 3
MAX_KILLS = 3

computes = st.builds(Compute, artifact=st.booleans())
# A workflow's deadline (seconds from its start), or none: short enough to fall mid-run.
deadlines = st.sampled_from([None, None, 3.0, 6.0])


def acts(orders_dedupe: bool) -> st.SearchStrategy[Act]:
    act = st.builds(
        Act, provider=st.sampled_from(["notify", "orders", "publish"]), honors_key=st.sampled_from([True, False])
    )
    return act.map(lambda a: a if a.provider != "orders" or orders_dedupe else replace(a, honors_key=False))


# The manager's answers, round by round: requested changes, then the last answer.
verdicts = st.tuples(st.sampled_from([0, 0, 1, 2]), st.sampled_from(["approve", "approve", "reject"])).map(
    lambda d: ("request_changes",) * d[0] + (d[1],)
)


def agents(avoid: frozenset[str]) -> st.SearchStrategy[Agent]:
    return st.builds(
        Agent,
        provider=st.sampled_from(["notify", "publish"]),
        repeats=st.just(0) if "agent_repeats" in avoid else st.sampled_from([0, 1, 3]),
        decisions=verdicts,
        duplicates=st.sampled_from([0, 1, 2]),
        same_event=st.booleans(),
    )


def approvals(orders_dedupe: bool) -> st.SearchStrategy[Approve]:
    return st.builds(
        Approve,
        effects=st.lists(acts(orders_dedupe), min_size=1, max_size=2).map(tuple),
        decisions=verdicts,
        duplicates=st.sampled_from([0, 1, 2]),
        same_event=st.booleans(),
    )


waits = st.one_of(
    st.builds(Wait, signal=st.just(False), timeout=st.sampled_from([0.5, 1, 2]), send=st.just(False)),
    st.builds(
        Wait,
        signal=st.just(True),
        timeout=st.sampled_from([3600, 2]),
        send=st.sampled_from([True, True, True, False]),
        duplicates=st.sampled_from([0, 1, 2]),
        same_event=st.booleans(),
    ),
)


def children(avoid: frozenset[str]) -> st.SearchStrategy[Children]:
    return st.builds(Children, count=st.sampled_from([1, 2] if "empty_children" in avoid else [1, 0, 2]))


def flows(orders_dedupe: bool, *, with_children: bool, avoid: frozenset[str] = frozenset()) -> st.SearchStrategy[Flow]:
    kinds = [computes, acts(orders_dedupe), approvals(orders_dedupe), waits, agents(avoid)]
    if with_children:
        kinds.append(children(avoid))
    most = MAX_MAIN_BLOCKS if with_children else MAX_CHILD_BLOCKS
    return st.lists(st.one_of(*kinds), min_size=1, max_size=most).map(lambda blocks: Flow(tuple(blocks)))


def failpoints(case: Case) -> list[Kill]:
    """Every failpoint kill the case's steps offer (a worker crashes itself there)."""
    steps = steps_of(case.main, "s") + (steps_of(case.child, "c") if case.has_children else [])
    found = []
    for step in steps:
        points = ["before_step", "after_step"]
        if step.kind in ("effect", "agent"):
            points += ["before_effect_call", "after_effect_call"]
        found += [Kill(point=p, step=step.name) for p in points]
        if step.kind == "agent":  # its first call (then parked for the approval) and the one after
            found += [
                Kill(point=p, step=f"{step.name}:c{n}")
                for n in (1, 2)
                for p in ("before_model_call", "after_model_call")
            ]
    if case.has_children:
        found.append(Kill(point="before_parent_wake"))
    return found


@st.composite
def cases(draw, avoid: frozenset[str] = frozenset()) -> Case:
    """A case; ``avoid`` names shapes of ``AVOIDABLE`` left out."""
    unknown = set(avoid) - set(AVOIDABLE)
    if unknown:
        raise ValueError(f"FUZZ_AVOID: unknown {sorted(unknown)}; one of {sorted(AVOIDABLE)}")
    orders_dedupe = draw(st.sampled_from([True, False]))
    main = draw(flows(orders_dedupe, with_children=True, avoid=avoid))
    child = draw(flows(orders_dedupe, with_children=False, avoid=avoid))
    case = Case(main=main, child=child)
    timers = st.builds(Kill, point=st.just("timer"), seconds=st.sampled_from([1.0, 0.5, 2.0, 3.0]))
    kills = draw(st.lists(st.one_of(st.sampled_from(failpoints(case)), timers), max_size=MAX_KILLS))
    rendered = steps_of(main, "s") + (steps_of(child, "c") if case.has_children else [])
    used = sorted({s.block.provider for s in rendered if isinstance(s.block, Act | Agent)})
    faults = (
        draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["error_500", "rate_limit", "commit_then_hang", "timeout"]), st.sampled_from(used)
                ),
                max_size=2,
            )
        )
        if used
        else []
    )
    schedule = Schedule(
        starts=draw(st.sampled_from([1, 2, 3])),
        restart_start=draw(st.booleans()),
        workers=draw(st.sampled_from([1, 2])),
        kills=tuple(kills),
        duplicate_messages=draw(st.sampled_from([0, 2, 5])),
        faults=tuple(faults),
        orders_dedupe=orders_dedupe,
    )
    # Loops, drawn last (a seed draws the same cases as before loops existed, then loops
    # some of their effects): an effect visited 1 (no loop), 2 or 3 times.
    main, child = (_looped(draw, flow) for flow in (main, child))
    # Deadlines, drawn after the loops (a seed draws the same cases as before, then gives
    # some a deadline): seconds from the start, short enough to fall mid-run.
    main, child = (replace(flow, deadline=draw(deadlines)) for flow in (main, child))
    return replace(case, main=main, child=child, schedule=schedule)


def _looped(draw, flow: Flow) -> Flow:
    return Flow(
        tuple(
            replace(block, passes=draw(st.sampled_from([1, 2, 3]))) if isinstance(block, Act) else block
            for block in flow.blocks
        )
    )
