"""Named failure points for crash tests (the failpoint pattern of etcd and TiKV).

A failpoint does nothing unless ``RUNTIME_FAILPOINTS`` names it, e.g.
``RUNTIME_FAILPOINTS="before_step:draft_report=pause,after_effect_call:publish=crash"``.
When hit it touches ``$RUNTIME_FAILPOINT_DIR/<name>`` (so a test knows the worker got
there) and then: ``pause`` blocks forever (the test SIGKILLs the process), ``crash``
SIGKILLs its own process, ``sleep:N`` sleeps N seconds.

Points in the runtime: ``before_step:<step>``, ``after_step:<step>`` (after commit),
``before_effect_call:<step>``, ``after_effect_call:<step>`` (answer received, not
yet recorded), ``before_model_call:<step>:c<n>``, ``after_model_call:<step>:c<n>``
(the n-th model call of the step; answered, not yet in the journal),
``after_route_choice:<step>:c<n>`` (a route's n-th answer in the journal, the step not
yet checkpointed), ``before_beside_call:<type>``, ``after_beside_call:<type>`` (a
notification or a webhook, sent beside the steps; answered, not yet recorded),
``migrate:<RUN_…>`` (an operator's migration of that execution, inside its transaction,
nothing written yet: triage.migration).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def _configured() -> dict[str, str]:
    spec = os.environ.get("RUNTIME_FAILPOINTS", "")
    points = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, action = item.partition("=")
        points[name] = action or "pause"
    return points


def hit(name: str) -> None:
    action = _configured().get(name)
    if action is None:
        return
    marker_dir = os.environ.get("RUNTIME_FAILPOINT_DIR")
    if marker_dir:
        Path(marker_dir).mkdir(parents=True, exist_ok=True)
        (Path(marker_dir) / name.replace(":", "__")).write_text(str(os.getpid()))
    if action == "pause":
        while True:
            time.sleep(1)
    elif action == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action.startswith("sleep:"):
        time.sleep(float(action.split(":", 1)[1]))
