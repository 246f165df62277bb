"""Synthetic workflows for benchmarks: trivial steps, so the runtime's own cost shows.

- ``bench_compute``: ten compute steps (`make bench`, bench/run.py);
- ``bench_noop5``: five no-op compute steps, the peers' workload (bench/peers_row.py,
  ``/work/shared/bench-peers``: DBOS, LangGraph, a bare Celery chain);
- ``bench_noop3``: three no-op compute steps, the round trip of bench/anchors.py;
- ``bench_gate``: a draft artifact, an approval gate on it, one no-op step after it,
  for the resume latency (decision committed → the step after the gate done);
- ``bench_parent`` / ``bench_child``: a parent whose children step starts ``n``
  one-step children, then one step (bench/children.py).

Registered through ``RUNTIME_WORKFLOW_MODULES`` (add ``bench.flows``).
"""

from approvals.gate import Approval
from bench import marks
from executions.authoring import Child, registry
from executions.authoring.workflow import Workflow

STEPS = 10
NOOP_STEPS = 5

flow = registry.register(
    Workflow(
        name="bench_compute",
        version=1,
        title="Benchmark: ten compute steps",
        parse_input=lambda raw: {"n": int(raw.get("n", 0))},
        goal=lambda data: "measure the runtime",
    )
)


def _make(index: int):
    def step(ctx):
        return {"i": index, "n": ctx.input["n"]}

    return step


for i in range(STEPS):
    flow.step(f"s{i}", label=f"Step {i}")(_make(i))


def _noop(index: int):
    def step(ctx):
        return {"i": index}

    return step


def _noops(name: str, steps: int, title: str) -> Workflow:
    """A workflow of ``steps`` no-op compute steps (``step1`` …)."""
    noops = registry.register(
        Workflow(
            name=name,
            version=1,
            title=title,
            parse_input=lambda raw: {"n": int(raw.get("n", 0))},
            goal=lambda data: "measure the runtime",
        )
    )
    for i in range(1, steps + 1):
        noops.step(f"step{i}", label=f"No-op {i}")(_noop(i))
    return noops


noop5 = _noops("bench_noop5", NOOP_STEPS, "Benchmark: five no-op compute steps")
# Three no-op steps: the workload of Restate's published round trip (bench/anchors.py).
noop3 = _noops("bench_noop3", 3, "Benchmark: three no-op compute steps")


gate = registry.register(
    Workflow(
        name="bench_gate",
        version=1,
        title="Benchmark: a draft, an approval gate, one step after it",
        parse_input=lambda raw: {"n": int(raw.get("n", 0))},
        goal=lambda data: "measure the resume latency",
    )
)


@gate.step("draft", label="Drafting")
def draft(ctx):
    ctx.save_artifact(
        "doc", kind="bench", title="Benchmark draft", content=f"draft {ctx.input['n']}", content_type="text/plain"
    )
    return {"drafted": True}


gate.gate("review", label="Awaiting approval", spec=Approval(artifact="doc", action="bench_publish"))


@gate.step("after", label="After the gate")
def after(ctx):
    return {"after": True}


child = registry.register(
    Workflow(
        name="bench_child",
        version=1,
        title="Benchmark: a child of one compute step",
        parse_input=lambda raw: {"n": int(raw.get("n", 0))},
        goal=lambda data: "measure the runtime",
    )
)
child.step("only", label="The only step")(_noop(0))

parent = registry.register(
    Workflow(
        name="bench_parent",
        version=1,
        title="Benchmark: a parent of n children",
        parse_input=lambda raw: {"n": int(raw.get("n", 0))},
        goal=lambda data: "measure the runtime",
    )
)


@parent.children("kids", label="Waiting for the children")
def kids(ctx):
    return [Child(workflow="bench_child", input={"n": i}, key=f"c{i}") for i in range(ctx.input["n"])]


parent.step("after", label="After the children")(_noop(1))


marks.connect()
