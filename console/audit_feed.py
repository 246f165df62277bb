"""The operator audit's page and CSV as one feed, newest first: the execution acts of
``triage.operator_audit`` and the acts on no one execution — a workflow's kill switch
thrown or lifted (``WorkflowSwitch``, append-only) and schedules made and deleted
(``Schedule``) — issue 39 item 12. Here, above both apps, because triage and schedules
don't import each other. The API's cursor walks the events alone (``triage.api``)."""

from __future__ import annotations

from django.db.models import Case, CharField, F, QuerySet, Value, When

from executions.models import ExecutionEvent, ExecutionTombstone, WorkflowSwitch, pk_from_ref
from schedules.models import Schedule
from triage.operator_audit import ACTIONS, ARCHIVE, KILL_SWITCH, Act, Filters, act_of, acts

EVENT = "event"


def feed(filters: Filters | None = None) -> QuerySet:
    """Every act matching ``filters`` as ``(source, id, at)`` rows, newest first: the
    execution events of ``acts`` and the kill switches and schedules made and deleted
    (``OTHER_ACTIONS``). A filter by execution or batch keeps the events alone. Read a
    slice of it with ``acts_in``."""
    filters = filters or Filters()
    parts = []
    if not filters.action or filters.action in ACTIONS:
        parts.append(acts(filters).order_by().annotate(source=Value(EVENT), at=F("created_at")))
    if not (filters.execution or filters.batch):
        switches = WorkflowSwitch.objects.annotate(
            source=Case(
                When(paused=True, then=Value("workflow_pause")),
                default=Value("workflow_resume"),
                output_field=CharField(),
            ),
            at=F("created_at"),
        )
        parts.append(_other(switches, filters, actor="actor__username"))
        made = Schedule.objects.annotate(source=Value("schedule_create"), at=F("created_at"))
        parts.append(_other(made, filters, actor="created_by__username"))
        gone = Schedule.objects.filter(deleted_at__isnull=False)
        gone = gone.annotate(source=Value("schedule_delete"), at=F("deleted_at"))
        parts.append(_other(gone, filters, actor="deleted_by__username"))
    if not (filters.batch or filters.actor) and filters.action in ("", ARCHIVE):
        # An archived execution's acts went with it into the archive (issue 39 item 10): a row says where.
        gone = ExecutionTombstone.objects.annotate(source=Value(ARCHIVE), at=F("archived_at"))
        if filters.execution:
            gone = gone.filter(pk=pk_from_ref(filters.execution))
        parts.append(_other(gone, filters, actor=""))
    parts = [p.values_list("source", "id", "at") for p in parts]
    if not parts:
        return ExecutionEvent.objects.none().values_list("id")
    return parts[0].union(*parts[1:], all=True).order_by("-at", "-id")


def _other(rows: QuerySet, filters: Filters, *, actor: str) -> QuerySet:
    if filters.action:
        rows = rows.filter(source=filters.action)
    if filters.actor and actor:
        rows = rows.filter(**{f"{actor}__iexact": filters.actor})
    if filters.date_from:
        rows = rows.filter(at__date__gte=filters.date_from)
    if filters.date_to:
        rows = rows.filter(at__date__lte=filters.date_to)
    return rows.order_by()


def acts_in(rows) -> list[Act]:
    """The ``(source, id, at)`` rows of ``feed`` as Acts, in their order (a query per source)."""
    rows = list(rows)
    wanted: dict[str, list[int]] = {}
    for source, pk, _at in rows:
        wanted.setdefault(source, []).append(pk)
    found: dict[tuple[str, int], Act] = {}
    if wanted.get(EVENT):
        for event in acts().filter(id__in=wanted[EVENT]):
            found[(EVENT, event.pk)] = act_of(event)
    switch_ids = wanted.get("workflow_pause", []) + wanted.get("workflow_resume", [])
    for switch in WorkflowSwitch.objects.filter(id__in=switch_ids).select_related("actor"):
        found[("workflow_pause" if switch.paused else "workflow_resume", switch.pk)] = _switch_act(switch)
    schedule_ids = wanted.get("schedule_create", []) + wanted.get("schedule_delete", [])
    for schedule in Schedule.objects.filter(id__in=schedule_ids).select_related("created_by", "deleted_by"):
        for source in ("schedule_create", "schedule_delete"):
            if schedule.pk in wanted.get(source, []):
                found[(source, schedule.pk)] = _schedule_act(schedule, source)
    for tombstone in ExecutionTombstone.objects.filter(id__in=wanted.get(ARCHIVE, [])):
        found[(ARCHIVE, tombstone.pk)] = _archive_act(tombstone)
    return [found[(source, pk)] for source, pk, _at in rows if (source, pk) in found]


def _archive_act(tombstone: ExecutionTombstone) -> Act:
    return Act(
        id=tombstone.pk,
        at=tombstone.archived_at,
        execution=str(tombstone),
        actor="keel archive",
        action=ARCHIVE,
        reason=f"its acts are in the archive: keel archive --show {tombstone}",
        before="",
        after="archived",
        subject=tombstone.manifest,
        batch="",
    )


def _switch_act(switch: WorkflowSwitch) -> Act:
    return Act(
        id=switch.pk,
        at=switch.created_at,
        execution="",
        actor=switch.actor.get_username(),
        action="workflow_pause" if switch.paused else "workflow_resume",
        reason=switch.reason,
        before="running" if switch.paused else "paused",
        after="paused" if switch.paused else "running",
        subject=f"{KILL_SWITCH}: workflow {switch.workflow}",
        batch="",
    )


def _schedule_act(schedule: Schedule, source: str) -> Act:
    created = source == "schedule_create"
    who = schedule.created_by if created else schedule.deleted_by
    return Act(
        id=schedule.pk,
        at=schedule.created_at if created else schedule.deleted_at,
        execution="",
        actor=who.get_username() if who is not None else "(not recorded)",
        action=source,
        reason="",
        before="" if created else "active",
        after="active" if created else "deleted",
        subject=f"schedule {schedule.pk}: {schedule.workflow} at {schedule.cron} ({schedule.timezone})",
        batch="",
    )
