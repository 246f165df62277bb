"""Workflows only the children tests register (listed in RUNTIME_WORKFLOW_MODULES):
``family_parent`` starts one child per label and sums up their outputs; ``family_child``
does one compute step (or, with ``fail: true``, fails — unless it is a restart)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from executions.authoring import Child, FailureKind, StepFailure, Workflow, WorkflowInput, parse_with, register


class ChildInput(WorkflowInput):
    label: str
    fail: bool = False


child = register(
    Workflow(
        name="family_child",
        version=1,
        title="A child that says its label",
        parse_input=parse_with(ChildInput),
        goal=lambda data: f"say {data['label']}",
    )
)


@child.step("work", label="Saying its label")
def work(ctx) -> dict[str, Any]:
    if ctx.input["fail"] and ctx.execution.restarted_from_id is None:  # a restart passes
        raise StepFailure(FailureKind.INVALID_INPUT, f"{ctx.input['label']} was told to fail")
    return {"said": ctx.input["label"].upper()}


class ParentInput(WorkflowInput):
    labels: list[str] = Field(default_factory=lambda: ["a", "b", "c"])
    child: str = "family_child"
    extra: dict[str, Any] = Field(default_factory=dict)  # merged into every child's input
    fail: list[str] = Field(default_factory=list)  # the labels whose child fails


parent = register(
    Workflow(
        name="family_parent",
        version=1,
        title="A parent of one child per label",
        parse_input=parse_with(ParentInput),
        goal=lambda data: "hear every child",
    )
)


@parent.children("kids", label="Waiting for the children")
def kids(ctx) -> list[Child]:
    return [
        Child(
            workflow=ctx.input["child"],
            input={"label": label, **({"fail": True} if label in ctx.input["fail"] else {}), **ctx.input["extra"]},
            key=label,
        )
        for label in ctx.input["labels"]
    ]


@parent.step("sum_up", label="Hearing the children")
def sum_up(ctx) -> dict[str, Any]:
    heard = ctx.state["kids"]
    return {"heard": {key: out["state"]["work"]["said"] for key, out in sorted(heard.items())}}
