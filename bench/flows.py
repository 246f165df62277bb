"""A synthetic workflow for benchmarks: N trivial compute steps, so the runtime's cost shows."""

from executions import registry
from executions.workflow import Workflow

STEPS = 10

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
