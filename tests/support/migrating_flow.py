"""A small workflow in four versions, for the migration's tests without processes
(tests/integration/test_migration.py): v1 collects, counts, waits for ``go``, finishes;

- v2 renames ``count`` to ``tally`` (its output reshaped) and says so in ``migrate_from``;
- v3 drops ``count`` (``finish`` counts for itself): a step gone;
- v4 has no wait (an execution waiting there can't be placed), and its ``migrate_from``
  for v1 fails;
- v5 inserts ``prepare`` before the wait: an execution waiting there never ran it (a
  blocker an operator may accept).
"""

from executions.authoring.registry import register
from executions.authoring.workflow import Workflow

NAME = "migrating"


def _flow(version: int, **extra) -> Workflow:
    return Workflow(name=NAME, version=version, title="Migrating", **extra)


def _collect(ctx):
    return {"items": ["a", "b", "c"]}


v1 = _flow(1)
v1.step("collect", label="Collecting")(_collect)


@v1.step("count", label="Counting")
def count(ctx):
    return {"n": len(ctx.state["collect"]["items"])}


v1.wait("hold", label="Waiting for the go", signal="go", timeout=3600)


@v1.step("finish", label="Finishing")
def finish_v1(ctx):
    return {"done": ctx.state["count"]["n"]}


def _count_is_tally(state: dict) -> dict:
    outputs = state["outputs"]
    if "count" in outputs:
        outputs["tally"] = {"total": outputs.pop("count")["n"]}
    if state["step"] == "count":
        state["step"] = "tally"
    return state


v2 = _flow(2, migrate_from={1: _count_is_tally})
v2.step("collect", label="Collecting")(_collect)


@v2.step("tally", label="Tallying")
def tally(ctx):
    return {"total": len(ctx.state["collect"]["items"])}


v2.wait("hold", label="Waiting for the go", signal="go", timeout=3600)


@v2.step("finish", label="Finishing")
def finish_v2(ctx):
    return {"done": ctx.state["tally"]["total"], "on": 2}


v3 = _flow(3)
v3.step("collect", label="Collecting")(_collect)
v3.wait("hold", label="Waiting for the go", signal="go", timeout=3600)


@v3.step("finish", label="Finishing")
def finish_v3(ctx):
    return {"done": len(ctx.state["collect"]["items"]), "on": 3}


def _fails(state: dict) -> dict:
    raise KeyError("legacy_field")


v4 = _flow(4, migrate_from={1: _fails})
v4.step("collect", label="Collecting")(_collect)


@v4.step("finish", label="Finishing")
def finish_v4(ctx):
    return {"done": 0}


v5 = _flow(5)
v5.step("collect", label="Collecting")(_collect)


@v5.step("prepare", label="Preparing (v5 only)")
def prepare(ctx):
    return {"ready": True}


v5.step("count", label="Counting")(count)
v5.wait("hold", label="Waiting for the go", signal="go", timeout=3600)
v5.step("finish", label="Finishing")(finish_v1)

for flow in (v1, v2, v3, v4, v5):
    register(flow)
