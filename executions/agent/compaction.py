"""Compaction of an agent round's conversation across context windows.

An agent step's request is the system text built from the execution's notes (the goal,
every mandatory constraint verbatim, the verified facts with their sources —
``executions.authoring.notes``) plus the round's messages: the task, then each tool
call and its result. When those messages would pass ``threshold`` tokens before a call —
half the model's context window by default (``RUNTIME_MODEL_CONTEXT_WINDOWS``), or the
step's ``Budget(conversation_tokens=n)`` — the runtime *folds* the earlier turns — every message
between the task and the latest turn — into one progress note: what was tried, each
line with its call key as the source, and the open questions (proposals refused or
failed). The goal and constraints are never in the folded part (they are the system
text's, verbatim), and the verified facts stay structured in it.

The fold is journalled: ``fold`` answers a record ``{"before_call", "folded", "note",
"open_questions"}`` that the agent commits with the call it shaped (its context, and a
``context.compacted`` event); when the step runs again (after a crash, or back from an
approval) the recorded fold at that call is applied as it was, so the rebuilt
conversation — and its request hash — is identical, and it is never folded twice.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings

from ..authoring.notes import estimate_tokens, quoted

JSON = dict[str, Any]
NOTE_HEADING = "Progress so far (earlier turns compacted by the runtime; sources are model-call keys):"


DONE, FAILED = "→", "✗"  # a note line: "- tried <tool> <args JSON> → <result> (source: <call key>)"
RESULT_CHARS = 500


def _clipped(text: str) -> str:
    return text if len(text) <= RESULT_CHARS else text[: RESULT_CHARS - 1] + "…"


def _name(name: str) -> str:
    """A tool's name as the model proposed it: as it is when it looks like one, else quoted
    (a name is model-written: it must not start a line of the note)."""
    return name if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name) else quoted(name)


def threshold(model: str, configured: int | None) -> int | None:
    """How many tokens a round's conversation may reach before it is folded: the step's
    ``Budget(conversation_tokens=…)`` when it sets one (0: never), else half the model's
    context window (``RUNTIME_MODEL_CONTEXT_WINDOWS``, else ``RUNTIME_MODEL_CONTEXT_WINDOW``):
    the other half holds the notes, the tools and the answer."""
    if configured is not None:
        return configured or None
    window = settings.RUNTIME_MODEL_CONTEXT_WINDOWS.get(model, settings.RUNTIME_MODEL_CONTEXT_WINDOW)
    return window // 2


def tokens(messages: list[JSON]) -> int:
    return estimate_tokens(json.dumps(messages, sort_keys=True, ensure_ascii=False))


def _latest_turn(messages: list[JSON]) -> int:
    """The index of the last assistant message (the latest turn starts there)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "assistant":
            return index
    return len(messages)


def fold(messages: list[JSON], *, keys: dict[str, str], before_call: int) -> JSON | None:
    """The fold of ``messages`` before call ``before_call``, or None when nothing can be
    folded (only the task and the latest turn). ``keys`` maps a tool call's id to the key
    of the model call that proposed it."""
    cut = _latest_turn(messages)
    if cut <= 1:
        return None
    task, _, earlier = messages[0]["content"].partition("\n\n" + NOTE_HEADING)
    lines = [line for line in earlier.splitlines() if line.startswith("- ")]  # an earlier fold's, kept
    questions: list[str] = []
    calls = {}
    for message in messages[1:cut]:
        for call in message.get("tool_calls", []) if message["role"] == "assistant" else ():
            calls[call["id"]] = call
        if message["role"] != "tool":
            continue
        call = calls.get(message["tool_call_id"], {})
        args = json.dumps(call.get("args"), sort_keys=True, ensure_ascii=False)
        source = keys.get(message["tool_call_id"], "?")
        content = _clipped(message["content"])
        name = _name(message["name"])
        if message.get("is_error"):
            lines.append(f"- tried {name} {args} {FAILED} {content} (source: {source})")
            questions.append(f"{name} was refused or failed: {content} (source: {source}); what instead?")
        else:
            lines.append(f"- tried {name} {args} {DONE} {content} (source: {source})")
    note = "\n".join([NOTE_HEADING, *lines])
    return {"before_call": before_call, "folded": cut - 1, "note": note, "open_questions": questions}


def apply(messages: list[JSON], record: JSON) -> list[JSON]:
    """``messages`` with ``record``'s fold applied: the task with the note after it (one
    user turn), then the latest turn."""
    task = messages[0]["content"].partition("\n\n" + NOTE_HEADING)[0]
    first = {"role": "user", "content": f"{task}\n\n{record['note']}"}
    return [first, *messages[1 + record["folded"] :]]
