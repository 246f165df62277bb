"""The ``classify`` step kind: the model labels a text with one of the labels the step
declares; the label is the step's output ``{"label", "model_calls"}``. Its call goes
through keel's journal (recorded before the step goes on, never asked again after a
crash, compared by ``keel replay``), and an answer that is not one of the labels stops
the execution for a person instead of guessing.

Everything about the kind is here: its declaration (``Classify``, in ``Step.spec``),
how authors declare it (``flow.classify(…)``), how a worker runs a visit, how ``keel
replay`` runs it again, and what the resume preview says it will do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from executions import runtime
from executions.authoring import Decision, ModelRequest
from executions.runtime import NeedsAttention, declaration

KIND = "classify"


@dataclass(frozen=True, kw_only=True)
class Classify:
    """What a classify step declares: its prompt, the labels, the text to label."""

    prompt_id: str
    labels: tuple[str, ...]
    text: Callable[[Any], str]  # fn(ctx): what to label
    offline_policy: Callable[[ModelRequest], Decision] | None = None


@declaration(KIND)
def classify(
    flow, name: str, *, label: str, prompt_id: str, prompt_version: str, labels: list[str], text, offline_policy=None
):
    """``flow.classify(name, label=…, prompt_id=…, prompt_version=…, labels=[…], text=fn)``."""
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise ValueError(f"{flow.name} v{flow.version}: classify {name} needs at least two distinct labels")
    spec = Classify(prompt_id=prompt_id, labels=tuple(labels), text=text, offline_policy=offline_policy)
    flow.declare(KIND, name, label=label, spec=spec, prompt_version=prompt_version)


def ask(ctx, step, model) -> dict:
    """The label, asked of ``model`` (the journal: a worker's or a replay's)."""
    spec: Classify = step.spec
    request = ModelRequest(
        prompt_id=spec.prompt_id,
        prompt_version=step.prompt_version,
        system=ctx.prompt(f"Answer with exactly one word, one of: {', '.join(spec.labels)}."),
        messages=({"role": "user", "content": spec.text(ctx)},),
        offline_policy=spec.offline_policy,
    )
    answer = model.ask(request).text.strip().lower()
    runtime.failpoint(f"after_classify:{step.name}")  # journaled, not yet checkpointed: the crash tests' hook
    if answer not in spec.labels:
        raise NeedsAttention(f"the model answered {answer[:80]!r}, not one of {', '.join(spec.labels)}")
    return {"label": answer, "model_calls": model.summary()}


class ClassifyStep(runtime.StepHandler):
    kind = KIND

    def run(self, lease, ctx, workflow, step) -> runtime.Done:
        return runtime.Done(ask(ctx, step, runtime.journaled_model(lease, ctx.execution, step.name)))

    def replay(self, ctx, workflow, step, *, model, recorded) -> None:
        """The journal compares the request; the answer, read again, must give the label
        the visit recorded (``recorded``: its output; None for a step not finished)."""
        try:
            label = ask(ctx, step, model)["label"]
        except NeedsAttention as stop:
            raise runtime.ReplayDrift("model_call", model.keys[-1], str(stop)) from None
        if recorded is not None and recorded.get("label") != label:
            raise runtime.ReplayDrift("model_call", model.keys[-1], f"now {label!r}; it was {recorded.get('label')!r}")

    def later(self, step) -> str:
        return f"asks the model to label it one of {', '.join(step.spec.labels)}; the answer is recorded"


runtime.register_step_kind(ClassifyStep())
