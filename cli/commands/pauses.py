"""``keel pause``: an operator's hold on one execution (``POST /api/executions/{id}/pause``,
the same body, service and JSON); ``keel resume`` lifts it."""

from __future__ import annotations

from executions import pauses

from ..registry import command
from .executions import _acted, _reason_arguments

command(
    "pause",
    help="Pause an execution where it is; resume returns it to the status it left (operators)",
    arguments=_reason_arguments,
    acts=True,
)(_acted(pauses.execution_pause))
