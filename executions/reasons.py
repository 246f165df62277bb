"""Why an execution is not moving: the stuck vocabulary (docs/design.md §4), one ``TextChoices``.

Every place that names a reason names a member of ``StuckReason``: the transitions
that record one with the status they set (``Execution.reason_code``: the runner, the
gates, the sweeper, a step's ``NeedsAttention``), the annotation that reads the others
off the clock (``executions.stuck``), the API's filter and fields, the counts and the
measures. A leaf: it imports nothing of the project but ``executions.choices``.
"""

from __future__ import annotations

from .choices import TextChoices


class StuckReason(TextChoices):
    RETRYING = "retrying", "Retrying"
    RATE_LIMITED = "rate_limited", "Rate limited"
    NO_WORKER = "no_worker", "No worker"
    STEP_OVERDUE = "step_overdue", "Step overdue"
    APPROVAL_OVERDUE = "approval_overdue", "Approval overdue"
    WAITING_OVERDUE = "waiting_overdue", "Waiting overdue"
    UNKNOWN_OUTCOME = "unknown_outcome", "Unknown outcome"
    PERMISSION_DENIED = "permission_denied", "Permission denied"
    RETRIES_EXHAUSTED = "retries_exhausted", "Retries exhausted"
    STEP_ERROR = "step_error", "Step error"
    APPROVAL_LAPSED = "approval_lapsed", "Approval lapsed"
    MODEL_DRIFT = "model_drift", "Model drift"
    BUDGET_EXCEEDED = "budget_exceeded", "Budget exceeded"
    DEADLINE_PASSED = "deadline_passed", "Deadline passed"
    COMPENSATION_PENDING = "compensation_pending", "Compensation pending"
    CHILD_FAILED = "child_failed", "Child failed"
    PAUSED = "paused", "Paused"
    LOOP_LIMIT = "loop_limit", "Loop limit"
