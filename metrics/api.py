"""The measures in the Task API (docs/design.md §6): ``GET /api/metrics?window=`` and, for the
metrics page's charts, ``GET /api/metrics/history?window=``. Operators, managers and
auditors; anyone else 403. ``config.api`` adds this router."""

from __future__ import annotations

from typing import Annotated

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Schema
from pydantic import AfterValidator

from apikit.answers import ErrorOut
from executions.errors import Forbidden
from executions.inputs import WorkflowName
from executions.plans import plain_plans

from . import access, windows
from .history import history
from .measures import measures

router = Router()

WindowText = Annotated[str, AfterValidator(windows.check)]


class Quantiles(Schema):
    p50: float | None
    p95: float | None


class Integrity(Schema):
    matched: int
    refused: int


class MetricsOut(Schema):
    recovery_success_rate: float | None
    duplicate_effect_rate: float | None
    resume_latency_ms: Quantiles
    stuck: dict[str, int]
    approval_integrity: Integrity
    cancellation_violations: int
    time_in_state_seconds: dict[str, Quantiles]
    approval_latency_seconds: Quantiles
    cost_usd: dict[str, dict[str, float]]


class HistoryOut(Schema):
    window_seconds: int
    interval_seconds: int
    buckets: list[int]
    executions: dict[str, list[int]]
    stuck_flagged: dict[str, list[int]]
    time_in_state_seconds: dict[str, dict[str, list[float | None]]]
    resume_latency_ms: dict[str, list[float | None]]
    approval_latency_seconds: dict[str, list[float | None]]
    previous: MetricsOut


READ = {401: ErrorOut, 403: ErrorOut, 422: ErrorOut, 500: ErrorOut}


def _window(text: str) -> windows.Window:
    return windows.Window(until=timezone.now(), length=windows.parse(text))


def _authorise(request: HttpRequest) -> None:
    if not access.may_read(request.user):
        raise Forbidden("only operators, managers and auditors may read the metrics")


@router.get("/metrics", response={200: MetricsOut, **READ}, tags=["metrics"])
def get_metrics(request: HttpRequest, window: WindowText = "24h", workflow: WorkflowName | None = None):
    """The seeds' measures over the last ``window`` (``<n>h`` or ``<n>d``), optionally for one workflow."""
    _authorise(request)
    with plain_plans():
        return measures(_window(window), workflow=workflow or None)


@router.get("/metrics/history", response={200: HistoryOut, **READ}, tags=["metrics"])
def get_metrics_history(request: HttpRequest, window: WindowText = "24h", workflow: WorkflowName | None = None):
    """The measures per interval over ``window`` (the metrics page's charts), and the
    measures of the window before it (``previous``, for trends)."""
    _authorise(request)
    with plain_plans():
        return history(_window(window), workflow=workflow or None)
