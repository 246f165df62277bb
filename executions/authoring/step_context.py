"""What a step sees: the execution's input, earlier outputs, notes and artifacts.

Steps never write the database. They stage artifacts and facts here; the runner
commits them with the step's checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from artifacts import store
from artifacts.models import ArtifactVersion
from artifacts.services import artifact_version_content

from . import notes as progress_notes
from .workflow import Workflow


@dataclass(frozen=True)
class StagedArtifact:
    name: str
    kind: str
    title: str
    blob: store.StoredBlob
    content_type: str


class StepContext:
    def __init__(self, *, execution, workflow: Workflow) -> None:
        self.execution = execution
        self.workflow = workflow
        self.staged_artifacts: list[StagedArtifact] = []
        self.new_facts: list[dict[str, Any]] = []
        self.new_hypotheses: list[dict[str, Any]] = []

    @property
    def ref(self) -> str:
        return self.execution.ref

    @property
    def input(self) -> dict[str, Any]:
        return self.execution.input

    @property
    def state(self) -> dict[str, Any]:
        """Outputs of completed steps, by step name (read-only for steps)."""
        return self.execution.outputs()

    @property
    def visit(self) -> int:
        """Which pass through the current step this is: 1, then 2, … each time an edge
        (a loop, changes requested) leads back to it."""
        return len(self.visits(self.execution.current_step)) + 1

    def visits(self, step: str) -> list[Any]:
        """Every completed visit's output of ``step``, oldest first (``state[step]`` is the last)."""
        return self.execution.visit_outputs(step)

    @property
    def notes(self) -> dict[str, Any]:
        return self.execution.context["notes"]

    def current_notes(self) -> dict[str, Any]:
        """The notes with what this step has verified or heard so far (not yet committed)."""
        current = dict(self.notes)
        current["facts"] = progress_notes.merge_facts(self.notes["facts"], self.new_facts)
        current["hypotheses"] = progress_notes.merge_hypotheses(self.notes.get("hypotheses", []), self.new_hypotheses)
        return current

    def prompt(
        self, instruction: str, *, tools: tuple[tuple[str, str], ...] = (), budget_tokens: int | None = None
    ) -> str:
        """The context for a model (executions.authoring.notes.render): the goal, every constraint and
        every verified fact so far, within the token budget. Raises notes.OverBudget."""
        return progress_notes.render(
            self.current_notes(), instruction=instruction, tools=tools, budget_tokens=budget_tokens
        )

    def add_facts(self, facts: list[dict[str, Any]]) -> None:
        """Verified facts ({id, statement, source, ...}) for the notes, committed with the step.
        Only tool results and receipts are facts."""
        self.new_facts.extend(facts)

    def add_hypothesis(self, text: str, *, source: str) -> None:
        """What a model said (``source``: the call key), for the notes as a hypothesis."""
        if text.strip():
            self.new_hypotheses.append({"text": text.strip(), "source": source})

    def save_artifact(self, name: str, *, kind: str, title: str, content: str | bytes, content_type: str) -> None:
        """Store the bytes now (content-addressed); the version row is added at checkpoint."""
        data = content.encode() if isinstance(content, str) else content
        self.staged_artifacts.append(
            StagedArtifact(name=name, kind=kind, title=title, blob=store.put(data), content_type=content_type)
        )

    def next_version(self, name: str) -> int:
        """The number the next version of artifact ``name`` will get at checkpoint."""
        current = self.execution.context.get("artifacts", {}).get(name)
        return (current["version"] if current else 0) + 1

    def artifact(self, name: str) -> dict[str, Any]:
        """The reference of the latest checkpointed version of artifact ``name``."""
        return self.execution.context["artifacts"][name]

    def artifact_content(self, name: str) -> bytes:
        version = ArtifactVersion.objects.get(pk=self.artifact(name)["version_pk"])
        return artifact_version_content(version)
