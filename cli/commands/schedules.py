"""``keel schedules``: the schedules and their latest firings, as ``GET /api/schedules``
answers them; ``keel schedules add`` and ``keel schedules delete ID`` as ``POST
/api/schedules`` and ``DELETE /api/schedules/{id}`` (operators; the same body,
``ScheduleIn``, the same services and JSON).

The list needs no ``--as``: like ``keel list``, the shell reads. With ``--as USER`` it reads
with that user's authority, as the API does (operators only: anyone else is refused)."""

from __future__ import annotations

from executions import inputs
from schedules import services
from schedules.api import ScheduleIn, ScheduleOut
from schedules.models import Schedule

from ..registry import Result, api_json, command, json_argument, positive


def schedule_json(schedule: Schedule) -> dict:
    """A schedule exactly as ``GET /api/schedules`` lists it."""
    return api_json(ScheduleOut, services.schedule_payload(schedule))


def _line(item: dict) -> str:
    last = item["firings"][0] if item["firings"] else None
    said = f"; last {last['fire_at']} {last['outcome']} {last['execution'] or last['detail']}" if last else ""
    inactive = "" if item["creator_active"] else f" (its creator {item['created_by']} is deactivated: refused)"
    deleted = " (deleted: it never fires again)" if item["deleted"] else ""
    return (
        f"#{item['id']} {item['workflow']} at {item['cron']!r} ({item['timezone']}, overlap {item['overlap']}): "
        f"next {item['next_fire_at']}{inactive}{deleted}{said}"
    )


@command(
    "schedules",
    help="The schedules, their next firing and latest firings (--as: as that user, operators only)",
    as_optional=True,
)
def schedules(args, user) -> Result:
    found = services.schedule_list(user=user)  # None: the shell reads, as keel list does
    items = [schedule_json(s) for s in found]
    return Result({"items": items}, [_line(item) for item in items] or ["no schedules"])


def _add_arguments(parser) -> None:
    parser.add_argument("--workflow", required=True, help="the workflow it starts (keel workflows lists them)")
    parser.add_argument("--cron", required=True, metavar="EXPR", help="five fields (minute hour day month weekday)")
    parser.add_argument("--timezone", metavar="ZONE", help="an IANA time zone, e.g. Europe/Paris (default UTC)")
    parser.add_argument("--input", help='the input of each execution as JSON, e.g. \'{"month": "2026-08"}\'')
    parser.add_argument("--overlap", help="skip (while the previous execution is live; the default) or allow")


@command("schedules add", help="Add a schedule of a workflow (operators)", arguments=_add_arguments, acts=True)
def add(args, user) -> Result:
    given = {
        "timezone": args["timezone"],
        "input": json_argument(args["input"], field_name="input"),
        "overlap": args["overlap"],
    }
    body = inputs.parse(
        ScheduleIn,
        {
            "workflow": args["workflow"],
            "cron": args["cron"],
            **{name: value for name, value in given.items() if value is not None},
        },
    )
    schedule = services.schedule_create(
        user=user,
        workflow=body.workflow,
        cron=body.cron,
        timezone_name=body.timezone,
        input=body.input,
        overlap=body.overlap,
    )
    item = schedule_json(schedule)
    return Result(item, [_line(item)])


def _delete_arguments(parser) -> None:
    parser.add_argument("id", type=positive, help="the schedule's id (keel schedules lists them)")


@command(
    "schedules delete",
    help="Delete a schedule: it never fires again; its firings and executions stay (operators)",
    arguments=_delete_arguments,
    acts=True,
)
def delete(args, user) -> Result:
    item = schedule_json(services.schedule_delete(user=user, schedule_id=args["id"]))
    return Result(item, [_line(item)])
