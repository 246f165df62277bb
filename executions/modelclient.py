"""The model client interface and the offline deterministic default.

The runtime records every response (model name, prompt version, prompt, text) in the
step's checkpoint, so recovery replays the recorded answer instead of asking again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Protocol

from django.conf import settings
from django.utils.module_loading import import_string


@dataclass(frozen=True, kw_only=True)
class ModelResponse:
    text: str
    model: str
    prompt_version: str


class ModelClient(Protocol):
    name: str
    label: str  # what the screens show, e.g. "offline deterministic model"
    offline: bool

    def complete(self, *, prompt: str, prompt_version: str) -> ModelResponse: ...


class OfflineModelClient:
    """Writes a short narrative from the verified facts in the prompt. No network, no key.

    Deterministic: the same prompt always gives the same text, so tests and demos are
    repeatable. It only restates facts it was given; it never invents numbers.
    """

    name = "offline-deterministic-1"
    label = "Offline deterministic model (no network; for demos and tests)"
    offline = True

    def complete(self, *, prompt: str, prompt_version: str) -> ModelResponse:
        facts = re.findall(r"^- \[(F\d+)\] (.+?) \(source: [^)]*\)$", prompt, flags=re.MULTILINE)
        constraints = re.findall(r"^- MUST: (.+)$", prompt, flags=re.MULTILINE)
        if facts:
            lead = facts[0][1]
            rest = " ".join(statement for _, statement in facts[1:4])
            text = f"{lead} {rest}".strip()
        else:
            text = "No verified facts were provided, so no conclusions are drawn."
        if constraints:
            text += " Constraints followed: " + "; ".join(c.rstrip(".") for c in constraints) + "."
        return ModelResponse(text=text, model=self.name, prompt_version=prompt_version)


@cache
def get_model_client() -> ModelClient:
    return import_string(settings.RUNTIME_MODEL_CLIENT)()
