"""The claim's read compiled once (executions.engine.compiled) gives what Django's queryset
gives: every field converted the same way (JSON, decimals, aware datetimes, NULLs), the
annotations, None for a row the filter leaves out; and each read takes the id it is given."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from executions.engine import holds
from executions.engine.compiled import CompiledRead
from executions.models import Execution, Status, WorkflowSwitch


def _queryset(pk):
    return (
        Execution.objects.filter(pk=pk, status__in=[Status.PENDING, Status.RUNNING])
        .annotate(db_now=Now(), switch_thrown=holds.switch_thrown_of_row())
        .order_by()
    )


READ = CompiledRead(_queryset)


def _execution(user, workflow: str, **fields) -> Execution:
    return Execution.objects.create(
        workflow=workflow,
        workflow_version=3,
        input={"month": "2026-08", "nested": {"n": [1, 2]}},
        input_digest="d",
        created_by=user,
        current_step="retrieve",
        context={"notes": {"facts": [{"id": "F1", "statement": "ünïcode"}]}},
        **fields,
    )


def test_a_compiled_read_gives_the_instance_the_queryset_gives(transactional_db):
    user = get_user_model().objects.create_user("reader")
    plain = _execution(user, "monthly_report")
    full = _execution(
        user,
        "quarterly_report",
        budget_usd=Decimal("2.500001"),
        deadline=timezone.now() + timedelta(days=1),
        idempotency_key="k-1",
    )
    WorkflowSwitch.objects.create(workflow="quarterly_report", paused=True, reason="drill", actor=user)
    for execution in (plain, full):
        compiled, orm = READ.get(execution.pk), _queryset(execution.pk).first()
        assert type(compiled) is Execution and not compiled._state.adding
        for field in Execution._meta.concrete_fields:
            assert getattr(compiled, field.attname) == getattr(orm, field.attname), field.name
            assert type(getattr(compiled, field.attname)) is type(getattr(orm, field.attname)), field.name
        assert compiled.switch_thrown is orm.switch_thrown
        assert abs(compiled.db_now - orm.db_now) < timedelta(seconds=5) and compiled.db_now.tzinfo is not None
    assert (READ.get(plain.pk).switch_thrown, READ.get(full.pk).switch_thrown) == (False, True)


def test_a_row_the_filter_leaves_out_is_none(transactional_db):
    user = get_user_model().objects.create_user("reader")
    execution = _execution(user, "monthly_report")
    assert READ.get(execution.pk + 1000) is None
    Execution.objects.filter(pk=execution.pk).update(status=Status.COMPLETED)
    assert READ.get(execution.pk) is None


def test_a_read_that_does_not_take_exactly_one_id_is_refused(transactional_db):
    with pytest.raises(ValueError, match="exactly one id"):
        CompiledRead(lambda pk: Execution.objects.filter(Q(pk=pk) | Q(parent_id=pk))).get(1)
