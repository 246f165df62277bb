"""A step's checkpoint in one statement, one round trip and one commit (PostgreSQL).

The common case — a step succeeded that is not the last, made no artifact and sent no
effect — needs two writes: the fenced checkpoint of the execution (its state, the next
step) and the step run. The ORM would send BEGIN, an UPDATE, an INSERT and COMMIT, four
round trips, and compile both statements each time. Here they are one statement: the
UPDATE is the fence (our lease token and owner, still running, still at this step) and
its RETURNING feeds the INSERT, so the step run exists exactly when the fence held, and
the statement commits on its own (autocommit; inside a caller's transaction it simply
joins it). Nothing returned: the fence refused, nothing was written.

Everything else — the last step (a transition, through django-fsm), artifacts, effects,
failures — goes through the ORM path in ``executions.runner``, as does every step on
SQLite (no UPDATE inside a WITH there). The two paths write the same rows: the tests of
the runner run on both.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection

from .models import Execution, StepRun

# The columns are the models' (executions_execution, executions_steprun); the values
# are adapted by the models' own fields (JSON with Django's encoder, aware datetimes).
CHECKPOINT = """
WITH fenced AS (
    -- The fence and the checkpoint: only under our lease, only while running at this step.
    UPDATE executions_execution
       SET context = %(context)s,
           current_step = %(following)s,
           failed_attempts = 0,
           step_deadline = now() + %(timeout)s::float8 * interval '1 second',  -- NULL without a timeout
           updated_at = %(now)s
     WHERE id = %(id)s
       AND lease_token = %(token)s
       AND lease_owner = %(owner)s
       AND status = 'running'
       AND current_step = %(step)s
 RETURNING id
)
-- The step run, written only if the fence held.
INSERT INTO executions_steprun
       (execution_id, step, kind, round, attempt, outcome, output, error, worker,
        lease_token, workflow_version, started_at, finished_at)
SELECT id, %(step)s, %(kind)s, %(round)s, %(attempt)s, %(outcome)s, %(output)s, '', %(owner)s,
       %(token)s, %(version)s, %(started)s, %(now)s
  FROM fenced
RETURNING id
"""

_CONTEXT = Execution._meta.get_field("context")
_OUTPUT = StepRun._meta.get_field("output")


def available() -> bool:
    """Whether this database takes the one-statement checkpoint (PostgreSQL)."""
    return connection.vendor == "postgresql"


def checkpoint_step(
    *,
    execution: Execution,
    lease_token: int,
    lease_owner: str,
    step: str,
    kind: str,
    following: str,
    timeout: float | None,
    output: dict[str, Any],
    attempt: int,
    started: datetime,
    now: datetime,
) -> bool:
    """Checkpoint ``execution`` past ``step`` to ``following`` and record the step's run.
    True if written; False if the fence refused (nothing written)."""
    with connection.cursor() as cursor:
        cursor.execute(
            CHECKPOINT,
            {
                "context": _CONTEXT.get_db_prep_value(execution.context, connection),
                "following": following,
                "timeout": timeout,
                "now": now,
                "id": execution.pk,
                "token": lease_token,
                "owner": lease_owner,
                "step": step,
                "kind": kind,
                "round": execution.round,
                "attempt": attempt,
                "outcome": StepRun.Outcome.SUCCEEDED,
                "output": _OUTPUT.get_db_prep_value(output, connection),
                "version": execution.workflow_version,
                "started": started,
            },
        )
        return cursor.fetchone() is not None
