"""Structured progress notes for the model: goal, constraints, facts, progress.

Prompts are built from these notes, never from chat history, so a fresh worker or a
fresh model context continues without redoing work or dropping a constraint.
"""

from __future__ import annotations

from typing import Any


def initial(*, goal: str, constraints: list[str]) -> dict[str, Any]:
    return {
        "goal": goal,
        "constraints": list(constraints),
        "facts": [],
        "completed_steps": [],
        "open_questions": [],
        "next_action": "",
    }


def build_prompt(notes: dict[str, Any], *, instruction: str) -> str:
    """The whole working view a model needs: every constraint and every verified fact."""
    lines = [f"Goal: {notes['goal']}", "", "Mandatory constraints:"]
    lines += [f"- MUST: {c}" for c in notes["constraints"]] or ["- (none)"]
    lines += ["", "Verified facts (cite by id, do not change numbers):"]
    lines += [f"- [{f['id']}] {f['statement']} (source: {f['source']})" for f in notes["facts"]] or ["- (none)"]
    lines += ["", "Completed steps: " + (", ".join(notes["completed_steps"]) or "(none)")]
    if notes["open_questions"]:
        lines += ["Open questions:"] + [f"- {q}" for q in notes["open_questions"]]
    lines += ["", f"Task: {instruction}"]
    return "\n".join(lines)
