"""``keel schedules``: the schedules and their latest firings, as ``GET /api/schedules``
answers them (operators; the same service and JSON)."""

from __future__ import annotations

from schedules import services
from schedules.api import ScheduleOut

from ..registry import Result, command


@command("schedules", help="The schedules, their next firing and latest firings (operators)", acts=True)
def schedules(args, user) -> Result:
    items = [
        ScheduleOut.model_validate(services.schedule_payload(s)).model_dump(mode="json")
        for s in services.schedule_list(user=user)
    ]
    lines = []
    for item in items:
        last = item["firings"][0] if item["firings"] else None
        said = f"; last {last['fire_at']} {last['outcome']} {last['execution'] or last['detail']}" if last else ""
        inactive = "" if item["creator_active"] else f" (its creator {item['created_by']} is deactivated: refused)"
        lines.append(
            f"#{item['id']} {item['workflow']} at {item['cron']!r} ({item['timezone']}, overlap {item['overlap']}): "
            f"next {item['next_fire_at']}{inactive}{said}"
        )
    return Result({"items": items}, lines or ["no schedules"])
