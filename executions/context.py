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

    @property
    def ref(self) -> str:
        return self.execution.ref

    @property
    def input(self) -> dict[str, Any]:
        return self.execution.input

    @property
    def state(self) -> dict[str, Any]:
        """Outputs of completed steps, by step name (read-only for steps)."""
        return self.execution.context.get("state", {})

    @property
    def notes(self) -> dict[str, Any]:
        return self.execution.context["notes"]

    def prompt(self, instruction: str) -> str:
        """A prompt holding the goal, every constraint and every verified fact so far."""
        current = dict(self.notes)
        current["facts"] = self.notes["facts"] + self.new_facts
        return progress_notes.build_prompt(current, instruction=instruction)

    def add_facts(self, facts: list[dict[str, Any]]) -> None:
        """Verified facts ({id, statement, source, ...}) for the notes, committed with the step."""
        self.new_facts.extend(facts)

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
