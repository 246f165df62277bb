"""Reads: what the API, the screens and the CLI show about executions."""

from __future__ import annotations

import heapq
import json
import math
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.db.models import Prefetch, QuerySet, prefetch_related_objects
from django.db.models.fields.json import KeyTransform

from artifacts.models import ArtifactVersion

from . import stuck, visits
from .authoring import registry
from .engine import costs, gates, routing, tracing
from .errors import InvalidInput
from .models import Execution, ExecutionEvent, ModelCall, Status, StepRun, pk_from_ref, ref_for

PAGE_SIZE = 50


def step_label(execution: Execution) -> str:
    """What a person reads for "where is it": the current step's label, or the outcome."""
    if execution.status == Status.COMPLETED:
        return "Completed"
    if execution.status in (Status.FAILED, Status.CANCELLED) and not execution.current_step:
        return execution.get_status_display()
    try:
        flow = registry.get(execution.workflow, execution.workflow_version)
    except registry.UnknownWorkflow:
        return execution.current_step
    return flow.label_for(execution.current_step) if execution.current_step else ""


def gate_payload(pending: gates.PendingGate | None) -> dict[str, Any] | None:
    """The open gate an execution waits at, for the API: kind, step, a sentence, since/until."""
    if pending is None:
        return None
    return {
        "kind": pending.kind,
        "step": pending.step,
        "waiting_for": pending.waiting_for,
        "since": pending.since,
        "until": pending.until,
    }


def approval_payload(pending: gates.PendingGate | None) -> dict[str, Any] | None:
    """``pending_approval`` of the API (docs/design.md §6): the open approval gate's details."""
    return pending.details if pending is not None and pending.kind == "approval" else None


def input_payload(pending: gates.PendingGate | None) -> dict[str, Any] | None:
    """``pending_input`` of the API: the question a tool's provider asked, ``{id, message, schema}``."""
    return pending.details if pending is not None and pending.kind == "input" else None


def artifact_versions(execution: Execution) -> QuerySet[ArtifactVersion]:
    return ArtifactVersion.objects.filter(artifact__execution=execution).select_related("artifact")


def prefetch_payloads(executions: list[Execution]) -> list[Execution]:
    """Load what ``execution_payload`` reads for a whole page at once, so the page
    costs a fixed number of queries instead of a few per execution."""
    pending = gates.pending_for(executions)
    spends = costs.costs_for([e.pk for e in executions])
    restarts = dict(Execution.objects.filter(restarted_from__in=executions).values_list("restarted_from_id", "pk"))
    families: dict[int, list[dict[str, Any]]] = {}
    for child in Execution.objects.filter(parent__in=executions).order_by("pk").values(*_CHILD_FIELDS):
        families.setdefault(child["parent_id"], []).append(_child_item(child))
    consumed = cache(routing.live_queues)  # no_worker's detail: the registry asked at most once a page
    for execution in executions:
        execution.consumed_queues = consumed
        execution.pending_gate = pending.get(execution.pk)
        execution.spend = spends[execution.pk]
        execution.restarted_as_id = restarts.get(execution.pk)
        execution.children_items = families.get(execution.pk, [])
    prefetch_related_objects(
        executions,
        "actions",
        "hold_by",  # the legal hold's "by" (None for most: no query then)
        Prefetch(
            "artifacts__versions",
            queryset=ArtifactVersion.objects.select_related("artifact").order_by("number"),
        ),
    )
    return executions


def execution_payload(execution: Execution) -> dict[str, Any]:
    if not hasattr(execution, "stuck_reason"):  # read again with the triage annotations
        execution = stuck.annotated().filter(pk=execution.pk).select_related("created_by").get()
    if hasattr(execution, "pending_gate"):  # loaded by prefetch_payloads
        pending = execution.pending_gate
        versions = [v for artifact in execution.artifacts.all() for v in artifact.versions.all()]
    else:
        pending, versions = gates.pending_of(execution), list(artifact_versions(execution))
    return {
        "id": execution.ref,
        "workflow": execution.workflow,
        "workflow_version": execution.workflow_version,
        "status": execution.status,
        "status_reason": execution.status_reason,
        "current_step": execution.current_step,
        "step_label": step_label(execution),
        "input": execution.input,
        "created_by": execution.created_by.get_username(),
        "pending_approval": approval_payload(pending),
        "pending_gate": gate_payload(pending),
        "pending_input": input_payload(pending),
        "actions": [
            {"key": a.key, "type": a.type, "status": a.status, "attempts": a.attempts} for a in execution.actions.all()
        ],
        "artifacts": [
            {
                "artifact_id": v.artifact.ref,
                "version": v.number,
                "sha256": v.sha256,
                "size": v.size,
                "content_type": v.content_type,
                "produced_by_step": v.produced_by_step,
            }
            for v in versions
        ],
        "created_at": execution.created_at,
        "updated_at": execution.updated_at,
        **triage_fields(execution),
        **restart_links(execution),
        **family_fields(execution),
        "cost": cost_payload(execution),
        "paused_from": execution.paused_from or None,
        "hold": hold_payload(execution),
        "result": result_of(execution),
        "trace_id": tracing.trace_id_of(execution),
    }


def result_of(execution: Execution) -> Any:
    """What a completed execution produced (``Workflow.result``, recorded at its last
    step's checkpoint); None until it completed."""
    if execution.status != Status.COMPLETED:
        return None
    return (execution.context or {}).get("result")


def execution_state(execution: Execution) -> dict[str, Any]:
    """``GET /api/executions/{id}/state``: each step's latest output and the progress
    notes, as stored (redacted when written, executions.redaction)."""
    notes = (execution.context or {}).get("notes") or {}
    return {"steps": dict(execution.outputs()), "notes": notes}


def cost_payload(execution: Execution) -> dict[str, Any]:
    """``cost`` as the API shows it: what the execution and its descendants spent (the
    journal's recorded costs; ``usd`` null when no call had a price), their tokens, and its
    budget (executions.engine.costs)."""
    spend = getattr(execution, "spend", None) or costs.costs_for([execution.pk])[execution.pk]
    return {
        "usd": float(spend.spent_usd) if spend.priced else None,
        "input_tokens": spend.input_tokens,
        "output_tokens": spend.output_tokens,
        "budget_usd": float(execution.budget_usd) if execution.budget_usd is not None else None,
    }


_CHILD_FIELDS = ("pk", "parent_id", "workflow", "status", "parent_step")


def _child_item(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": ref_for(row["pk"]), "workflow": row["workflow"], "status": row["status"], "step": row["parent_step"]}


def family_fields(execution: Execution) -> dict[str, Any]:
    """``parent`` {id, step} or None, and ``children`` [{id, workflow, status, step}]
    (docs/design.md §6): the children it started, oldest first, each with the step that started it."""
    if hasattr(execution, "children_items"):  # loaded by prefetch_payloads
        children = execution.children_items
    else:
        rows = Execution.objects.filter(parent=execution).order_by("pk").values(*_CHILD_FIELDS)
        children = [_child_item(row) for row in rows]
    parent = {"id": ref_for(execution.parent_id), "step": execution.parent_step} if execution.parent_id else None
    return {"parent": parent, "children": children}


def hold_payload(execution: Execution) -> dict[str, Any] | None:
    """The legal hold (issue 23) as the API shows it: ``{reason, by, at}``, or None."""
    if execution.hold_at is None:
        return None
    by = execution.hold_by.get_username() if execution.hold_by_id else ""
    return {"reason": execution.hold_reason, "by": by, "at": execution.hold_at}


def restart_links(execution: Execution) -> dict[str, str | None]:
    """A restart's links both ways: the failed execution it continues, the one that continued it."""
    if hasattr(execution, "restarted_as_id"):  # loaded by prefetch_payloads
        following = execution.restarted_as_id
    else:
        following = restart.pk if (restart := execution.restart) is not None else None
    return {
        "restarted_from": ref_for(execution.restarted_from_id) if execution.restarted_from_id else None,
        "restarted_as": ref_for(following) if following else None,
    }


def execution_page(
    *,
    status: str | None = None,
    workflow: str | None = None,
    reason: str | None = None,
    parent: str | None = None,
    cursor: str | None = None,
    limit: int = PAGE_SIZE,
    hold: bool | None = None,
    input: str | None = None,
) -> tuple[list[Execution], str | None]:
    """Newest first, annotated with the stuck reason (and filtered on it with ``reason``).
    ``parent``: only the children of that execution; ``input``: ``KEY:VALUE`` (``input_match``).
    ``cursor`` is the ``next`` of the previous page."""
    rows = filtered(status=status, workflow=workflow, reason=reason, parent=parent, hold=hold, input=input)
    rows = rows.select_related("created_by").order_by("-id")
    if cursor:
        before = pk_from_ref(cursor)
        if before is None:
            raise InvalidInput("cursor", "not a cursor this API returned")
        rows = rows.filter(pk__lt=before)
    page = list(rows[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return page, (page[-1].ref if more and page else None)


def filtered(
    *,
    status: str | None = None,
    workflow: str | None = None,
    reason: str | None = None,
    parent: str | None = None,
    hold: bool | None = None,
    input: str | None = None,
):
    """Executions by status, workflow, stuck reason, parent, legal hold and a field of their
    input, annotated (``executions.stuck``)."""
    rows = stuck.annotated()
    if input:
        rows = _with_input(rows, input_match(input))
    if parent:
        parent_pk = pk_from_ref(parent)
        if parent_pk is None:
            raise InvalidInput("parent", f"not an execution id: {parent!r} (RUN_0042 or 42)")
        rows = rows.filter(parent_id=parent_pk)
    if hold is not None:
        rows = rows.filter(hold_at__isnull=not hold)
    if status:
        if status not in Status.values:
            raise InvalidInput("status", f"unknown status {status!r}; one of {', '.join(Status.values)}")
        rows = rows.filter(status=status)
    if workflow:
        rows = rows.filter(workflow=workflow)
    if reason:
        if reason not in stuck.REASONS:
            raise InvalidInput("reason", f"unknown reason {reason!r}; one of {', '.join(stuck.REASONS)}")
        rows = rows.filter(stuck.reason_filter(reason))  # what the indexes serve, not the computed reason
    return rows


_INPUT_KEY = re.compile(r"[A-Za-z0-9_-]{1,100}", re.ASCII)
INPUT_FILTER_FORM = "KEY:VALUE, e.g. month:2026-06"


def input_match(text: str) -> dict[str, Any]:
    """The list's ``input`` filter (issue 39, the peers' search by input) as the object an
    execution's input must contain: ``month:2026-06`` → ``{"month": "2026-06"}``. The key is
    letters, digits, ``_`` and ``-``; the value (after the first ``:``) is matched as a
    number or boolean when it reads as one in JSON (``confirm_within_seconds:60``,
    ``urgent:true``), as the string of a JSON string when quoted (``"60"``), else as typed.
    InvalidInput naming ``input`` otherwise."""
    key, colon, raw = text.partition(":")
    key = key.strip()
    if not colon or not _INPUT_KEY.fullmatch(key):
        raise InvalidInput("input", f"must be {INPUT_FILTER_FORM} (the key: letters, digits, _ and -), not {text!r}")
    if not raw:
        raise InvalidInput("input", f"{key!r} needs a value after the colon ({INPUT_FILTER_FORM})")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    if not isinstance(value, bool | int | float | str) or (isinstance(value, float) and not math.isfinite(value)):
        value = raw  # null, a list, an object, NaN or Infinity: matched as the text typed
    return {key: value}


def _with_input(rows: QuerySet, match: dict[str, Any]) -> QuerySet:
    """``rows`` whose input contains ``match``. On PostgreSQL the JSON containment ``@>``,
    served by the GIN index ``execution_input_path`` (migration 0035); elsewhere (the
    embedded SQLite of ``make run``) the same test per key, without an index."""
    if connection.vendor == "postgresql":
        return rows.filter(input__contains=match)
    for n, (key, value) in enumerate(match.items()):
        rows = rows.alias(**{f"_input_{n}": KeyTransform(key, "input")}).filter(**{f"_input_{n}": value})
    return rows


def execution(ref_or_pk: str | int) -> Execution | None:
    """One execution, annotated with its stuck reason."""
    pk = ref_or_pk if isinstance(ref_or_pk, int) else pk_from_ref(ref_or_pk)
    return stuck.annotated().filter(pk=pk).select_related("created_by").first() if pk else None


def triage_fields(execution: Execution) -> dict[str, Any]:
    """What an operator reads first: time in state, due time, attempt, lease, stuck reason."""
    max_attempts = _max_attempts(execution)
    described = stuck.describe(execution, max_attempts=max_attempts) if hasattr(execution, "stuck_reason") else None
    attempt = None
    if not execution.is_terminal and max_attempts and execution.current_step:
        running = execution.status in (Status.PENDING, Status.RUNNING, Status.RETRY_PENDING)
        n = max(1, execution.failed_attempts + (1 if running else 0))
        attempt = {"step": execution.current_step, "n": min(n, max_attempts), "max": max_attempts}
    lease = None
    if execution.lease_owner and not execution.is_terminal:
        lease = {"owner": execution.lease_owner, "expires_at": execution.lease_expires_at}
    return {
        "status_changed_at": execution.status_changed_at,
        "due_at": execution.due_at if execution.status in (Status.RETRY_PENDING, Status.WAITING) else None,
        "attempt": attempt,
        "lease": lease,
        "stuck": described.as_dict() if described else None,
    }


def _max_attempts(execution: Execution) -> int | None:
    try:
        step = registry.get(execution.workflow, execution.workflow_version).get_step(execution.current_step)
    except (registry.UnknownWorkflow, KeyError):
        return None
    return None if step.is_gate else step.retry.max_attempts


HISTORY_CHUNK = 1000  # events read at a time for the JSON Lines download


def execution_history(execution: Execution) -> Iterator[str]:
    """The execution's whole history as JSON Lines, oldest first (issue 39: the peers'
    downloadable history): one entry a line, ``{"event_id", "time", "type", "execution",
    "step", "from_status", "to_status", "actor", "payload"}``. Its events, with their
    payloads as stored (redacted when written, as the page's timeline shows them), and
    each step attempt (a step's completion is recorded once, as its run:
    ``step.completed`` or ``step.failed``, ``event_id`` null, the payload ``{"visit",
    "round", "attempt"}`` and the ``error`` of a failed one; its output is in
    ``/state``). Read ``HISTORY_CHUNK`` rows at a time, however long."""
    rows = ExecutionEvent.objects.filter(execution=execution).select_related("actor").order_by("id")
    ref = execution.ref
    events = (
        {
            "event_id": event.pk,
            "time": event.created_at,
            "type": event.type,
            "execution": ref,
            "step": event.step,
            "from_status": event.from_status,
            "to_status": event.to_status,
            "actor": event.actor.get_username() if event.actor is not None else event.actor_label,
            "payload": event.payload,
        }
        for event in rows.iterator(chunk_size=HISTORY_CHUNK)
    )
    merged = heapq.merge(events, _attempts(execution), key=lambda line: line["time"])
    for line in merged:
        line["time"] = line["time"].isoformat()  # microseconds and +00:00, as before the merge
        yield json.dumps(line, cls=DjangoJSONEncoder, ensure_ascii=False, sort_keys=True) + "\n"


def _attempts(execution: Execution) -> Iterator[dict[str, Any]]:
    """Each step attempt of ``execution`` as a history line, in the order they finished."""
    runs = StepRun.objects.filter(execution=execution).order_by("id")
    numbered = visits.visit_numbers(
        runs.only("id", "step", "outcome").iterator(chunk_size=HISTORY_CHUNK),
        carried=visits.carried_counts(execution),
    )
    fields = ("id", "step", "outcome", "round", "attempt", "error", "worker", "finished_at")
    for run in runs.only(*fields).iterator(chunk_size=HISTORY_CHUNK):
        payload = {"visit": numbered[run.pk], "round": run.round, "attempt": run.attempt}
        if run.error:
            payload["error"] = run.error
        yield {
            "event_id": None,
            "time": run.finished_at,
            "type": f"step.{'completed' if run.outcome == StepRun.Outcome.SUCCEEDED else 'failed'}",
            "execution": execution.ref,
            "step": run.step,
            "from_status": "",
            "to_status": "",
            "actor": run.worker,
            "payload": payload,
        }


def model_calls(execution: Execution) -> list[dict[str, Any]]:
    """The execution's model-call journal, oldest first, as the API shows it; a call asked
    again after an accepted drift is a later revision of its key, the earlier one
    ``superseded``."""
    calls = list(ModelCall.objects.filter(execution=execution).order_by("id"))
    superseded = {c.supersedes_id for c in calls if c.supersedes_id}
    return [
        {
            "key": c.key,
            "revision": c.revision,
            "superseded": c.pk in superseded,
            "step": c.step,
            "round": c.round,
            "seq": c.seq,
            "provider": c.provider,
            "model": c.model,
            "model_returned": c.model_returned,
            "prompt_id": c.prompt_id,
            "prompt_version": c.prompt_version,
            "request_sha256": c.request_sha256,
            "input_tokens": c.input_tokens,
            "output_tokens": c.output_tokens,
            "latency_ms": c.latency_ms,
            "cost_usd": float(c.cost) if c.cost is not None else None,
            "finish_reason": c.finish_reason,
            "tool_calls": [{"tool": t["name"], "args": t.get("args")} for t in c.response.get("tool_calls", [])],
            "created_at": c.created_at,
        }
        for c in calls
    ]
