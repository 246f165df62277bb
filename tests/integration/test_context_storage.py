"""An execution's context is stored without its empty parts and read whole (issue 25:
the row is rewritten at every checkpoint, so its size is paid once a step).

What is read is what was written, whichever way it was written (a model save, an
``update``, the fenced writer) and however it is read (an instance, ``values``); a row
stored whole, as before, reads the same; only the stored JSON is smaller."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.db import connection

from executions.authoring import notes
from executions.models import Execution


def _stored(pk: int) -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT context::text FROM executions_execution WHERE id = %s", [pk])
        return json.loads(cursor.fetchone()[0])


def _context() -> dict:
    return {
        "artifacts": {},
        "prompts": {},
        "notes": notes.initial(goal="a monthly report", constraints=["use only the snapshot"]),
    }


def test_the_empty_parts_are_left_out_of_the_row_and_put_back_when_read(transactional_db):
    user = get_user_model().objects.create_user("ctx")
    written = _context()
    execution = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={},
        input_digest="d",
        created_by=user,
        context=written,
    )
    assert _stored(execution.pk) == {"notes": {"goal": "a monthly report", "constraints": ["use only the snapshot"]}}
    assert Execution.objects.get(pk=execution.pk).context == written
    assert Execution.objects.filter(pk=execution.pk).values_list("context", flat=True).get() == written
    assert written == _context()  # storing it changed nothing in memory

    written["notes"]["facts"].append({"id": "F1", "statement": "31 rows", "source": "snapshot"})
    written["notes"]["completed_steps"].append("retrieve_figures")
    Execution.objects.filter(pk=execution.pk).update(context=written)
    assert _stored(execution.pk)["notes"]["facts"] == [{"id": "F1", "statement": "31 rows", "source": "snapshot"}]
    read = Execution.objects.get(pk=execution.pk).context
    assert read == written and read["notes"]["hypotheses"] == [] and read["prompts"] == {}


def test_a_row_stored_whole_reads_the_same(transactional_db):
    user = get_user_model().objects.create_user("ctx")
    execution = Execution.objects.create(
        workflow="monthly_report", workflow_version=1, input={}, input_digest="d", created_by=user
    )
    whole = {**_context(), "state": {"retrieve_figures": {"rows": 31}}}
    with connection.cursor() as cursor:  # as rows written before issue 25 hold it
        cursor.execute(
            "UPDATE executions_execution SET context = %s::jsonb WHERE id = %s", [json.dumps(whole), execution.pk]
        )
    assert Execution.objects.get(pk=execution.pk).context == whole
    assert Execution.objects.get(pk=execution.pk).outputs() == {"retrieve_figures": {"rows": 31}}
