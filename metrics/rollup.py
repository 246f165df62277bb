"""The rollup: the record's observations (``metrics.observations``) folded into counts per
minute, per hour and ever, so a measure over a week sums a few hundred rows instead of
reading a week of events.

``fold()`` — run by beat every ``RUNTIME_SWEEP_SECONDS`` beside the sweeper — folds the
minutes from ``Folded.through`` up to ``LAG`` ago (at most ``SPAN`` a pass) and moves
``through`` on, in one transaction; ``through`` only moves from where that pass read it
(a compare-and-set), so two folders never count a minute twice. ``LAG`` leaves time for
a transaction that stamped its rows a little before it committed, or a worker whose
clock runs a little behind.

``summed(since, until)`` reads a span: the folded part from the rollup (hours where
whole hours fit, minutes at the edges), the rest — the last few minutes, or everything
if nothing was folded — from the record the same way the fold would, so the answer is
the same whether or not a minute was folded yet. The folded part begins at the start of
the minute ``since`` falls in (an hour, past ``KEEP`` when minute rows are gone).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction
from django.db.models import F, Min, Q, Sum
from django.utils import timezone

from executions.models import ExecutionEvent

from . import histograms
from .models import Folded, Rollup
from .observations import Observation, observed
from .sql import Bucket

LAG = timedelta(minutes=2)
SPAN = timedelta(days=1)
KEEP = timedelta(days=8)  # minute rows older than this are dropped: hours remain
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# (interval start or None, measure) → bucket → [count, total of the values]
Sums = dict[tuple[int | None, str], dict[int, list]]


def _floor(moment: datetime, seconds: int) -> datetime:
    return datetime.fromtimestamp(int(moment.timestamp()) // seconds * seconds, tz=UTC)


def _ceil(moment: datetime, seconds: int) -> datetime:
    floored = _floor(moment, seconds)
    return floored if floored == moment else floored + timedelta(seconds=seconds)


def cell_of(observation: Observation) -> tuple[str, int, float]:
    """The observation's (measure, bucket, value for the total)."""
    if observation.value is None:
        return observation.measure, 0, 0.0
    return observation.measure, histograms.bucket(observation.value), observation.value * observation.n


# --- folding -------------------------------------------------------------------------


def fold(*, now: datetime | None = None) -> tuple[datetime, datetime] | None:
    """Fold the next span of closed minutes; the span folded, or None if there was none."""
    target = _floor((now or timezone.now()) - LAG, Rollup.MINUTE)
    with transaction.atomic():
        state = Folded.objects.select_for_update().filter(pk=1).first() or _begin(target)
        begin = state.through
        end = min(target, begin + SPAN)
        if end <= begin:
            return None
        cells: dict[tuple, list] = defaultdict(lambda: [0, 0.0])
        for observation in observed(begin, end):
            measure, bucket, total = cell_of(observation)
            minute = datetime.fromtimestamp(observation.minute, tz=UTC)
            for resolution, start in (
                (Rollup.MINUTE, minute),
                (Rollup.HOUR, _floor(minute, Rollup.HOUR)),
                (Rollup.EVER, EPOCH),
            ):
                cell = cells[(resolution, start, observation.workflow, measure, bucket)]
                cell[0] += observation.n
                cell[1] += total
        _add(cells.items())
        Rollup.objects.filter(resolution=Rollup.MINUTE, start__lt=end - KEEP).delete()
        moved = Folded.objects.filter(pk=1, through=begin).update(through=end, folded_at=timezone.now())
        if moved != 1:  # another folder took this span first: count nothing twice
            transaction.set_rollback(True)
            return None
    return begin, end


def fold_all(*, now: datetime | None = None, passes: int = 100) -> int:
    """Fold until caught up (at most ``passes`` spans); how many spans were folded."""
    done = 0
    while done < passes and fold(now=now) is not None:
        done += 1
    return done


def _begin(target: datetime) -> Folded:
    """The first fold starts at the first minute of the record — every execution's first
    event is its creation — or now, if it is empty."""
    first = ExecutionEvent.objects.filter(type="execution.created").aggregate(at=Min("created_at"))["at"]
    through = _floor(first, Rollup.MINUTE) if first else target
    state, _ = Folded.objects.get_or_create(pk=1, defaults={"through": through, "folded_at": timezone.now()})
    return Folded.objects.select_for_update().get(pk=state.pk)


def _add(cells: Iterable[tuple[tuple, list]]) -> None:
    """Add the cells' counts and totals to the rollup's rows (created when missing)."""
    table = connection.ops.quote_name(Rollup._meta.db_table)
    adapt = connection.ops.adapt_datetimefield_value
    rows = [
        (res, adapt(start), wf, measure, bucket, n, total) for (res, start, wf, measure, bucket), (n, total) in cells
    ]
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (resolution, start, workflow, measure, bucket, n, total) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (resolution, start, workflow, measure, bucket) "
            f"DO UPDATE SET n = {table}.n + excluded.n, total = {table}.total + excluded.total",
            rows,
        )


def folded_through() -> datetime | None:
    return Folded.objects.filter(pk=1).values_list("through", flat=True).first()


# --- reading -------------------------------------------------------------------------


def summed(
    since: datetime | None,
    until: datetime,
    *,
    workflow: str | None = None,
    interval: int | None = None,
    by_workflow: bool = False,
) -> Sums:
    """(group, measure) → {bucket: [count, total]} over ``[since, until)`` (``since``
    None: ever). Groups: intervals of ``interval`` seconds (a multiple of a minute), keyed
    by their start (Unix seconds); or workflows, ``by_workflow``; else one, keyed None."""
    sums: Sums = defaultdict(lambda: defaultdict(lambda: [0, 0.0]))
    through = folded_through()
    raw_from = since or EPOCH
    if through is not None and since is None and through <= until:
        _read(sums, Q(resolution=Rollup.EVER), workflow, None, by_workflow)
        raw_from = through
    elif through is not None and since is not None:
        begin = _floor(since, Rollup.MINUTE)
        if begin < timezone.now() - KEEP:  # its minute rows are gone: from the hour's start
            begin = _floor(since, Rollup.HOUR)
        folded_end = min(through, _floor(until, Rollup.MINUTE))
        if folded_end > begin:
            hours = interval is None or interval % Rollup.HOUR == 0
            _read(sums, _cover(begin, folded_end, hours=hours), workflow, interval, by_workflow)
            raw_from = folded_end
    for observation in observed(raw_from, until):
        if workflow and observation.workflow != workflow:
            continue
        measure, bucket, total = cell_of(observation)
        group = observation.workflow if by_workflow else observation.minute // interval * interval if interval else None
        cell = sums[(group, measure)][bucket]
        cell[0] += observation.n
        cell[1] += total
    return sums


def _cover(begin: datetime, end: datetime, *, hours: bool) -> Q:
    """The rollup rows that cover ``[begin, end)`` (minute-aligned): whole hours from hour
    rows when ``hours``, the rest from minute rows."""
    minutes = Q(resolution=Rollup.MINUTE)
    first_hour, last_hour = _ceil(begin, Rollup.HOUR), _floor(end, Rollup.HOUR)
    if not hours or first_hour >= last_hour:
        return minutes & Q(start__gte=begin, start__lt=end)
    edges = Q(start__gte=begin, start__lt=first_hour) | Q(start__gte=last_hour, start__lt=end)
    return (minutes & edges) | Q(resolution=Rollup.HOUR, start__gte=first_hour, start__lt=last_hour)


def _read(sums: Sums, rows: Q, workflow: str | None, interval: int | None, by_workflow: bool) -> None:
    found = Rollup.objects.filter(rows)
    if workflow:
        found = found.filter(workflow=workflow)
    if by_workflow:
        found = found.annotate(group=F("workflow"))
    elif interval:
        found = found.annotate(group=Bucket(F("start"), interval))
    group = ["group"] if by_workflow or interval else []
    for row in found.values(*group, "measure", "bucket").annotate(count=Sum("n"), sum=Sum("total")).order_by():
        cell = sums[(row.get("group"), row["measure"])][row["bucket"]]
        cell[0] += row["count"]
        cell[1] += row["sum"]


# --- what the measures take from the sums ----------------------------------------------


def count(sums: Sums, measure: str, at: int | None = None) -> int:
    return sum(cell[0] for cell in sums.get((at, measure), {}).values())


def counts(sums: Sums, measure: str, at: int | None = None) -> dict[int, int]:
    """The histogram of ``measure``: bucket → count."""
    return {bucket: cell[0] for bucket, cell in sums.get((at, measure), {}).items()}


def total(sums: Sums, measure: str, at: int | None = None) -> float:
    return sum(cell[1] for cell in sums.get((at, measure), {}).values())
