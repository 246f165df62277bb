"""What the execution page shows, as plain values.

Templates never reach into JSON payloads or receipts (a receipt with an ``items``
key once shadowed ``dict.items`` and broke the page): every row here is built in
Python from the record, with words for states and events a person can read.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from approvals.outcomes import action_state, hosts_only
from executions import blockers, visits
from executions.authoring import registry
from executions.authoring.workflow import failed_for_good
from executions.models import Action, Execution, ExecutionEvent, ModelCall, Status
from triage import restart

# Receipt fields worth a line of their own; the whole receipt is a click away.
RECEIPT_HEADLINE = ("reference", "status", "resolved_by", "closed_by", "evidence")
MAX_VALUE = 300
MAX_JSON = 6000


@dataclass(frozen=True)
class Item:
    """One labelled value of a row (``code`` renders it monospace)."""

    label: str
    value: str
    code: bool = False


def _clip(value: Any, limit: int = MAX_VALUE) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pretty_json(value: Any) -> str:
    """Indented JSON for a details box, clipped so a huge receipt can't swamp the page."""
    return _clip(json.dumps(value, indent=2, sort_keys=True, default=str), MAX_JSON)


def receipt_items(receipt: Any) -> list[Item]:
    """The identifying fields of a provider receipt: ids, reference, status, who resolved it."""
    if not isinstance(receipt, dict):
        return [Item("receipt", _clip(receipt))] if receipt not in (None, "") else []
    out = []
    for key in sorted(receipt):
        value = receipt[key]
        if isinstance(value, dict | list) or value in (None, ""):
            continue
        if key.endswith("_id") or key in RECEIPT_HEADLINE:
            out.append(Item(key.replace("_", " "), _clip(value), code=key != "evidence"))
    return out


def evidence_items(evidence: Any) -> list[Item]:
    """A reconciliation's evidence (lookup result or lookup error) as readable lines."""
    if not isinstance(evidence, dict):
        return [Item("evidence", _clip(evidence))] if evidence not in (None, "") else []
    out = []
    if evidence.get("lookup_error"):
        out.append(Item("lookup failed", _clip(evidence["lookup_error"])))
    elif evidence.get("lookup"):
        out.append(Item("lookup", _clip(evidence["lookup"])))
    if evidence.get("previous_status"):
        out.append(Item("before the lookup", _clip(evidence["previous_status"])))
    return out


def actor_name(label: str) -> str:
    return label.removeprefix("user:") if label else "system"


# --- the ledger


@dataclass(frozen=True)
class LedgerRow:
    key: str
    type: str
    status: str  # the ledger's own status, for machines and tests
    label: str  # what it means now, in words
    tone: str  # ok, info, warn, neutral, danger: the badge colour
    attempts: int
    note: str = ""
    receipt: list[Item] = field(default_factory=list)
    receipt_json: str = ""
    lookup: list[Item] = field(default_factory=list)  # the last reconciliation's evidence
    resolution: Item | None = None  # an operator's resolution and its evidence
    fields: list = field(default_factory=list)  # receipt fields a resolution must give (ReceiptField)

    compensation: bool = False
    # Its outcome unestablished, holding the resume (executions.blockers.unresolved): an
    # operator resolves it. Never an e-mail or webhook sent beside the steps.
    unresolved: bool = False
    authorised_by: str = ""  # the decision that lets it run ("approved by manager: approval #12 on V1")

    @property
    def open_compensation(self) -> bool:
        """A planned compensation an operator closes by hand once the execution is cancelled."""
        return self.compensation and self.status == Action.State.PLANNED


def ledger_rows(
    execution: Execution,
    actions: Iterable[Action],
    events: Iterable[ExecutionEvent],
    authorisers: dict[str, Any] | None = None,
) -> list[LedgerRow]:
    """``events``: the execution's ``action.*`` events, oldest first; ``authorisers``:
    what authorises actions (approval requests), by ``Action.gate_ref``."""
    lookups: dict[str, list[Item]] = {}
    resolutions: dict[str, Item] = {}
    resolved_by: dict[str, str] = {}
    for ev in events:
        payload = ev.payload if isinstance(ev.payload, dict) else {}
        key = payload.get("key")
        if not isinstance(key, str):
            continue
        if isinstance(payload.get("evidence"), dict):
            lookups[key] = evidence_items(payload["evidence"])
        if payload.get("resolved"):
            resolved_by[key] = actor_name(ev.actor_label)
            resolutions[key] = Item(
                f"resolved as {payload.get('to', '?')} by {actor_name(ev.actor_label)}",
                _clip(payload.get("evidence", "")),
            )
        if payload.get("closed"):
            resolutions[key] = Item(
                f"closed as {payload.get('to', '?')} by {actor_name(ev.actor_label)}",
                _clip(payload.get("evidence", "")),
            )
    fields = receipt_fields_by_step(execution)
    rows = []
    for action in actions:
        authoriser = (authorisers or {}).get(action.gate_ref)
        state = action_state(
            action,
            execution,
            authoriser=authoriser,
            resolved_by=resolved_by.get(action.key, ""),
        )
        # An e-mail or webhook told beside the steps: a URL in it is shown by its host alone
        # (a hook's path and query often carry its secret), as on the approval's pages.
        receipt, note = action.receipt, state.note
        if action.beside:
            if isinstance(receipt, dict):
                receipt = {k: hosts_only(v) if isinstance(v, str) else v for k, v in receipt.items()}
            elif isinstance(receipt, str):
                receipt = hosts_only(receipt)
            note = hosts_only(note)
        rows.append(
            LedgerRow(
                key=action.key,
                type=action.type,
                status=action.status,
                label=state.label,
                tone=state.tone,
                attempts=action.attempts,
                note=note,
                receipt=receipt_items(receipt),
                receipt_json=pretty_json(receipt) if receipt else "",
                lookup=lookups.get(action.key, []),
                resolution=resolutions.get(action.key),
                fields=list(fields.get(action.step, ())) if not action.is_compensation else [],
                compensation=action.is_compensation,
                unresolved=blockers.unresolved(action, execution),
                authorised_by=_authorised_by(authoriser, execution),
            )
        )
    return rows


def _authorised_by(request: Any, execution: Execution) -> str:
    """Which decision authorises an action: an approval request (approvals), named with
    the execution it belongs to when that is another one (a restart reused it). Only an
    approval authorises; changes requested or a reject voided the action, and says so."""
    if request is None or getattr(request, "decision", None) is None:
        return ""
    decision = request.decision
    where = f" in {request.execution.ref}" if request.execution_id != execution.pk else ""
    subject = f"approval #{request.pk}{where}: V{request.version} ({request.content_sha256[:12]})"
    if decision.decision == "approve":
        return f"authorised by {subject}, approved by {decision.approver}"
    return f"not authorised: {subject}, {decision.verdict_past} by {decision.approver}"


def receipt_fields_by_step(execution: Execution) -> dict[str, tuple]:
    """Step name → the receipt fields its effect declares (what later steps read)."""
    try:
        flow = registry.get(execution.workflow, execution.workflow_version)
    except registry.UnknownWorkflow:
        return {}
    return {s.name: s.receipt_fields for s in flow.steps if s.receipt_fields}


# --- the timeline

_TRANSITIONS = {
    "start": "Claimed by a worker",
    "await_approval": "Waiting for approval",
    "wait": "Waiting (a signal, a timer, children or a person's answer)",
    "schedule_retry": "Retry scheduled",
    "flag": "Needs attention",
    "complete": "Completed",
    "fail": "Failed",
    "cancel": "Cancelled",
    "resume_after_decision": "Continued after the decision",
    "wake": "Woken up (a signal, a timer, children or an answer)",
    "retry": "Retrying",
    "resume": "Resumed",
    "migrate": "Moved to another version of its workflow",
}

EVENT_TITLES = {
    "execution.created": "Started",
    "step.completed": "Step completed",
    "action.planned": "Effect planned",
    "action.approved": "Effect approved",
    "action.executing": "Effect sent",
    "action.succeeded": "Effect succeeded",
    "action.failed": "Effect failed",
    "action.unknown": "Outcome unknown",
    "approval.requested": "Approval requested",
    "approval.decided": "Decision recorded",
    "approval.superseded": "Approval superseded",
    "lease.taken_over": "Taken over by another worker",
    "execution.restarted": "Restarted as a new execution",
    "wait.opened": "Waiting started",
    "wait.received": "Signal received",
    "wait.timed_out": "Wait timed out",
    "wait.withdrawn": "Wait withdrawn",
    "input.requested": "A tool asks a person",
    "input.answered": "Answered",
    "input.withdrawn": "Question withdrawn",
    "operator.retry_now": "Retry now, by an operator",
    "operator.raise_budget": "Budget raised, by an operator",
    "operator.accept_request": "New model request accepted by an operator",
    "tool_call.refused": "Tool call refused",
    "route.refused": "Route choice refused",
    "context.compacted": "Conversation compacted into a progress note",
    "operator.bulk_item": "Part of a bulk operation",
}

_DECISIONS = {"approve": "Approved", "reject": "Rejected", "request_changes": "Changes requested"}


@dataclass(frozen=True)
class TimelineRow:
    at: Any
    title: str
    kind: str  # a CSS-safe family: transition, step, action, approval, lease, other
    actor: str
    step: str = ""
    move: str = ""
    details: list[Item] = field(default_factory=list)
    tone: str = ""


def event_title(ev: ExecutionEvent) -> str:
    payload = ev.payload if isinstance(ev.payload, dict) else {}
    if ev.type == "transition":
        return _TRANSITIONS.get(str(payload.get("transition", "")), "Status changed")
    if ev.type == "action.succeeded":
        if payload.get("resolved"):
            return "Resolved by an operator: it happened"
        if payload.get("reconciled"):
            return "Effect found by lookup"
    if ev.type == "action.failed" and payload.get("resolved"):
        return "Resolved by an operator: it did not happen"
    if ev.type.startswith("action.") and payload.get("closed"):
        return "Compensation carried out" if ev.type == "action.succeeded" else "Compensation not possible"
    if ev.type == "execution.created" and payload.get("restarted_from"):
        return f"Started: a restart of {_clip(payload['restarted_from'])}"
    if ev.type == "action.approved" and payload.get("input_id"):
        return "Effect held: its provider asks a person first (nothing done)"
    if ev.type == "action.executing" and (payload.get("attempt") or 1) > 1:
        return "Effect sent again (same key)"
    if ev.type == "approval.decided":
        return _DECISIONS.get(str(payload.get("decision", "")), "Decision recorded")
    if ev.type == "tool_call.result":
        verdict = "refused by the provider" if payload.get("is_error") else "result"
        return f"Tool {verdict}: {_clip(payload.get('tool', '?'), 100)}"
    return EVENT_TITLES.get(ev.type, ev.type.replace(".", " ").replace("_", " ").capitalize())


def _event_details(ev: ExecutionEvent) -> list[Item]:
    payload = ev.payload if isinstance(ev.payload, dict) else {}
    out: list[Item] = []

    def add(label: str, value: Any, *, code: bool = False) -> None:
        if value not in (None, "", [], {}):
            out.append(Item(label, _clip(value), code=code))

    add("reason", payload.get("reason"))
    if ev.type.startswith("input."):
        add("tool", payload.get("tool"), code=True)
        add("asks", payload.get("message"))
        add("answer", payload.get("answer"), code=True)
        add("id", payload.get("input_id"), code=True)
    if ev.type.startswith("action."):
        add("asks", payload.get("asks"))
        add("key", payload.get("key"), code=True)
        add("attempt", payload.get("attempt"))
        add("error", payload.get("error"))
        if isinstance(payload.get("evidence"), dict):
            out.extend(evidence_items(payload["evidence"]))
        elif payload.get("resolved") or payload.get("closed"):
            add("evidence", payload.get("evidence"))
        out.extend(receipt_items(payload.get("receipt")))
        add("compensates", payload.get("compensates"), code=True)
    elif ev.type.startswith("approval."):
        version = payload.get("artifact_version")
        add("version", f"V{version}" if version else "")
        add("sha256", str(payload.get("content_sha256", ""))[:12], code=True)
        add("comment", payload.get("comment"))
    elif ev.type == "step.completed":
        add("attempt", payload.get("attempt") if (payload.get("attempt") or 1) > 1 else None)
        if payload.get("model"):
            add("model", f"{payload['model']} · prompt {payload.get('prompt_version', '?')}")
    elif ev.type.startswith("wait."):
        add("signal", payload.get("signal"), code=True)
        add("timeout", f"{payload['timeout_seconds']:g} s" if payload.get("timeout_seconds") else None)
        add("event", payload.get("event_id"), code=True)
    elif ev.type.startswith("execution."):
        add("restarted as", payload.get("restarted_as"), code=True)
        add("from step", payload.get("from_step"), code=True)
        add(
            "reused",
            ", ".join(map(str, payload["reused_steps"])) if isinstance(payload.get("reused_steps"), list) else None,
        )
    elif ev.type.startswith("tool_call."):
        add("arguments", payload.get("args"), code=True)
        add("result", payload.get("result"), code=True)
    elif ev.type == "operator.accept_request":
        add("call", payload.get("key"), code=True)
        add("recorded", str(payload.get("recorded_sha256", ""))[:12], code=True)
        add("accepted", str(payload.get("rebuilt_sha256", ""))[:12], code=True)
    elif ev.type in ("route.refused", "context.compacted"):
        add("call", payload.get("call"), code=True)
        add("folded", f"{payload['folded']} messages" if payload.get("folded") else None)
        add("note", payload.get("note"))
    elif ev.type == "operator.raise_budget":
        add("budget", f"{payload.get('from', '?')} → {payload.get('to', '?')}")
    elif ev.type == "operator.bulk_item":
        add("batch", payload.get("batch"), code=True)
        add("operation", payload.get("operation"))
    elif ev.type == "lease.taken_over":
        add("from", payload.get("previous_owner"))
        add("token", payload.get("token"))
    elif ev.type == "transition":
        if payload.get("transition") == "migrate":
            add("version", f"v{payload.get('from_version')} → v{payload.get('to_version')}")
            position = payload.get("position") or {}
            if position.get("maps_to") and position.get("maps_to") != position.get("step"):
                add("position", f"{position.get('step')} → {position.get('maps_to')}")
            add("accepted", "; ".join(payload.get("accepted") or []) or None)
        add("code", payload.get("code"), code=True)
        add("signal", payload.get("signal"), code=True)
        add("error", payload.get("error"))
        add("verdict", payload.get("verdict") if payload.get("verdict") != payload.get("reason") else None)
    return out


_STATUS_LABELS = dict(Status.choices)


def timeline_rows(
    execution: Execution, events: Iterable[ExecutionEvent], runs: Iterable[Any] = ()
) -> list[TimelineRow]:
    """``events`` and the succeeded step runs (``runs``), newest first → rows with readable
    titles, dates and who did it. A step's completion is recorded once, as its step run;
    older histories also have ``step.completed`` events, shown the same way."""
    try:
        flow = registry.get(execution.workflow, execution.workflow_version)
        label_for = flow.label_for
    except registry.UnknownWorkflow:
        label_for = str
    pinned_prompts = (execution.context or {}).get("prompts") or {}
    rows = []
    for ev in events:
        payload = ev.payload if isinstance(ev.payload, dict) else {}
        title = event_title(ev)
        if ev.type == "step.completed":
            title = f"{title}: {payload.get('label') or label_for(ev.step)}"
        move = ""
        if ev.from_status or ev.to_status:
            before = _STATUS_LABELS.get(ev.from_status, ev.from_status) or "·"
            move = f"{before} → {_STATUS_LABELS.get(ev.to_status, ev.to_status)}"
        rows.append(
            TimelineRow(
                at=ev.created_at,
                title=title,
                kind=ev.type.split(".")[0] if "." in ev.type else ev.type,
                actor=actor_name(ev.actor_label),
                step=label_for(ev.step) if ev.step and ev.type != "step.completed" else "",
                move=move,
                details=_event_details(ev),
                tone=_event_tone(ev),
            )
        )
    runs = list(runs)
    numbered = visits.visit_numbers(reversed(runs), carried=visits.carried_counts(execution))
    several = {run.step for run in runs if numbered[run.pk] > 1}
    for run in runs:
        output = run.output if isinstance(run.output, dict) else {}
        details = [Item("attempt", str(run.attempt))] if run.attempt > 1 else []
        visit = f" (visit {numbered[run.pk]})" if run.step in several else ""
        for call in output.get("model_calls", [])[:1]:
            if isinstance(call, dict):
                # The version the call was built with; for runs recorded before it was kept, the
                # one the execution pinned for the step (it can't have used another).
                version = call.get("prompt_version") or pinned_prompts.get(run.step) or "?"
                details.append(Item("model", f"{call.get('model', '?')} · prompt {version}"))
        skipped = run.kind == "effect" and output.get("skipped") is True
        went_on = run.kind == "effect" and failed_for_good(run.output)  # its on_failure
        if went_on:
            failed = output["failed"]
            details.append(Item("why", f"{failed['kind']}: {failed['error']} (attempt {failed['attempt']})"))
        how = " (skipped: it acted on nothing)" if skipped else " (it failed for good: on_failure)" if went_on else ""
        rows.append(
            TimelineRow(
                at=run.finished_at,
                title=f"Step completed{how}: {label_for(run.step)}{visit}",
                kind="step",
                actor=actor_name(run.worker),
                details=details,
            )
        )
    rows.sort(key=lambda row: row.at, reverse=True)
    return rows


def _event_tone(ev: ExecutionEvent) -> str:
    if ev.type == "action.unknown" or ev.to_status in (Status.NEEDS_ATTENTION, Status.RETRY_PENDING):
        return "warn"
    if ev.to_status == Status.FAILED:
        return "danger"
    if ev.to_status == Status.COMPLETED or ev.type == "action.succeeded":
        return "ok"
    return ""


@dataclass(frozen=True)
class AttemptRow:
    """One attempt at one step, as the steps panel shows it."""

    step: str
    label: str
    kind: str
    visit: int  # its pass through the step (executions.visits)
    round: int
    attempt: int
    outcome: str
    started_at: Any
    seconds: float
    worker: str
    error: str
    evidence: list[Item]


def attempt_rows(execution: Execution, runs: Iterable[Any]) -> list[AttemptRow]:
    """Every attempt (``StepRun``), oldest first, with its duration, error and evidence
    (the model calls are in the journal: ``model_call_rows``)."""
    try:
        flow = registry.get(execution.workflow, execution.workflow_version)
    except registry.UnknownWorkflow:
        flow = None
    rows = []
    runs = list(runs)
    numbered = visits.visit_numbers(runs, carried=visits.carried_counts(execution))
    for run in runs:
        output = run.output if isinstance(run.output, dict) else {}
        if run.kind == "effect" and failed_for_good(run.output):
            continue  # not an attempt: the step's outcome after its failed one (on_failure), on the timeline
        evidence = output.get("evidence")
        rows.append(
            AttemptRow(
                step=run.step,
                label=flow.label_for(run.step) if flow else run.step,
                kind=run.kind,
                visit=numbered[run.pk],
                round=run.round,
                attempt=run.attempt,
                outcome=run.outcome,
                started_at=run.started_at,
                seconds=max(0.0, (run.finished_at - run.started_at).total_seconds()),
                worker=run.worker,
                error=_clip(run.error, 2000),
                evidence=evidence_items(evidence) if isinstance(evidence, dict) else [],
            )
        )
    return rows


def step_in_progress(execution: Execution, runs: list[Any], model_calls: int) -> str:
    """A sentence for the current step while none of its attempts has finished (an agent
    step reading, or parked at its approval), so the steps panel never says "no step has
    run" beside the calls and tool results it made; "" otherwise."""
    if execution.is_terminal or execution.status == Status.PENDING or not execution.current_step:
        return ""
    if any(r.step == execution.current_step and r.round == execution.round for r in runs):
        return ""
    try:
        label = registry.get(execution.workflow, execution.workflow_version).label_for(execution.current_step)
    except registry.UnknownWorkflow:
        label = execution.current_step
    slot = ((execution.context or {}).get("agents") or {}).get(f"{execution.current_step}:r{execution.round}") or {}
    results = len(slot.get("results") or {})
    if not model_calls and not results:
        return f"{label}: in progress, no attempt finished yet"
    return (
        f"{label}: in progress — {model_calls} model call{'s' if model_calls != 1 else ''} and {results} tool "
        f"result{'s' if results != 1 else ''} so far (the model calls below, the results on the timeline); no attempt "
        "finished yet"
    )


# --- the resume preview, restart and compensations (the triage console)

_PLAN_TONES = {"skip": "neutral", "run": "info", "blocked": "warn"}
_PLAN_LABELS = {"skip": "skipped", "run": "runs", "blocked": "blocked"}


@dataclass(frozen=True)
class PlannedStep:
    name: str
    label: str
    kind: str
    plan: str  # skip, run, blocked: for machines and tests
    plan_label: str
    tone: str
    why: str
    visit: int = 1  # its pass through the step (a loop, changes requested: 2, 3, …)
    visits: int = 1  # how many of the step's visits the plan lists: numbered only when more than one


@dataclass(frozen=True)
class PreviewEffect:
    key: str
    type: str
    status: str
    may_repeat: bool
    provider_dedupes: bool


@dataclass(frozen=True)
class StaleApproval:
    approval_id: int
    version: int
    sha256: str
    why: str


@dataclass(frozen=True)
class ResumePlan:
    """A resume preview (triage.preview) as the confirmation page says it."""

    can_resume: bool
    blocked_by: list[str]
    steps: list[PlannedStep]
    effects: list[PreviewEffect]
    stale: list[StaleApproval]
    pinned: int
    latest: int

    def _named(self, plan: str) -> list[str]:
        return [s.label for s in self.steps if s.plan == plan]

    @property
    def skipped(self) -> list[str]:
        return self._named("skip")

    @property
    def running(self) -> list[str]:
        return self._named("run")

    @property
    def blocked(self) -> list[str]:
        return self._named("blocked")

    @property
    def repeats(self) -> list[PreviewEffect]:
        return [e for e in self.effects if e.may_repeat]


def resume_plan(preview: dict[str, Any]) -> ResumePlan:
    return ResumePlan(
        can_resume=preview["can_resume"],
        blocked_by=list(preview["blocked_by"]),
        steps=[
            PlannedStep(
                name=s["step"],
                label=s["label"],
                kind=s["kind"],
                plan=s["plan"],
                plan_label=_PLAN_LABELS[s["plan"]],
                tone=_PLAN_TONES[s["plan"]],
                why=s["why"],
                visit=s["visit"],
                visits=sum(1 for other in preview["steps"] if other["step"] == s["step"]),
            )
            for s in preview["steps"]
        ],
        effects=[PreviewEffect(**e) for e in preview["effects"]],
        stale=[
            StaleApproval(
                approval_id=a["approval_id"], version=a["artifact_version"], sha256=a["content_sha256"], why=a["why"]
            )
            for a in preview["stale_approvals"]
        ],
        pinned=preview["workflow_version"]["pinned"],
        latest=preview["workflow_version"]["latest"],
    )


@dataclass(frozen=True)
class StepChoice:
    """A step the restart form offers (one a restart can work from), with what it would send again."""

    name: str
    label: str
    selected: bool
    repeats: list[str] = field(default_factory=list)  # "KEY (why)"
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RestartForm:
    choices: list[StepChoice]
    refused: list[Item]  # the steps a restart can't work from, and why

    @property
    def repeats(self) -> bool:
        return any(c.repeats for c in self.choices)


def restart_form(execution: Execution) -> RestartForm:
    """The restart form of a failed execution (triage.restart.restart_options): only the
    steps a restart can work from, the right one selected, each with what it sends again."""
    options = restart.restart_options(execution)
    passes = Counter(o.step for o in options)
    return RestartForm(
        choices=[
            StepChoice(
                name=o.step if passes[o.step] == 1 else f"{o.step}@{o.visit}",  # console.operate reads it back
                label=o.label,
                selected=o.default,
                repeats=[f"{r.key} ({r.why})" for r in o.repeats],
                warnings=list(o.warnings),
            )
            for o in options
            if o.works
        ],
        refused=[Item(o.label, o.why_not) for o in options if not o.works],
    )


@dataclass(frozen=True)
class ModelCallRow:
    """One journal entry as the execution page shows it: who asked what, and the answer."""

    key: str
    step: str
    round: int
    seq: int
    provider: str
    model: str
    model_returned: str
    prompt: str  # prompt id and version
    tokens: str
    latency_ms: int
    finish_reason: str
    tool_calls: list[str]
    request_sha256: str
    system: str
    messages: list[Item]
    response: str
    created_at: Any
    revision: int = 1  # > 1: asked again after an operator accepted a new request
    superseded: bool = False  # a later revision of its key replaced it (kept as it was)


def model_call_rows(calls: Iterable[ModelCall]) -> list[ModelCallRow]:
    """The model-call journal, oldest first, each with its prompt (system text and
    messages) and its answer (text and proposed tool calls), clipped for the page."""
    calls = list(calls)
    superseded = {c.supersedes_id for c in calls if c.supersedes_id}
    rows = []
    for call in calls:
        request = call.request if isinstance(call.request, dict) else {}
        response = call.response if isinstance(call.response, dict) else {}
        messages = [
            Item(label=str(m.get("role", "")) + (f" · {m['name']}" if m.get("name") else ""), value=_message_text(m))
            for m in request.get("messages", [])
            if isinstance(m, dict)
        ]
        rows.append(
            ModelCallRow(
                key=call.key,
                step=call.step,
                round=call.round,
                seq=call.seq,
                provider=call.provider,
                model=call.model,
                model_returned=call.model_returned,
                prompt=f"{call.prompt_id} {call.prompt_version}".strip(),
                tokens=f"{call.input_tokens} in · {call.output_tokens} out"
                + (f" · ${call.cost}" if call.cost is not None else ""),
                latency_ms=call.latency_ms,
                finish_reason=call.finish_reason,
                tool_calls=[
                    f"{c.get('name')}({_clip(c.get('args') if c.get('args') is not None else c.get('raw', ''), 500)})"
                    for c in response.get("tool_calls", [])
                    if isinstance(c, dict)
                ],
                request_sha256=call.request_sha256,
                system=_clip(request.get("system", ""), 20_000),
                messages=messages,
                response=_clip(response.get("text", ""), 20_000),
                created_at=call.created_at,
                revision=call.revision,
                superseded=call.pk in superseded,
            )
        )
    return rows


def _message_text(message: dict[str, Any]) -> str:
    text = str(message.get("content") or "")
    calls = message.get("tool_calls") or []
    if calls:
        text += (" " if text else "") + "; ".join(
            f"→ {c.get('name')}({_clip(c.get('args'), 300)})" for c in calls if isinstance(c, dict)
        )
    return _clip(text, 5000)


# --- a model drift: the two requests side by side (triage.drift)

MAX_DIFF_LINES = 400


@dataclass(frozen=True)
class DiffLine:
    kind: str  # add, del, ctx, hunk: for the page's colours
    text: str


@dataclass(frozen=True)
class DriftCard:
    """What an operator compares before accepting a new request for a drifted call."""

    key: str
    step: str
    recorded_sha256: str
    rebuilt_sha256: str
    accepted: bool
    diff: list[DiffLine]
    rebuilt_known: bool  # the stopped attempt kept the rebuilt request (older drifts didn't)


def request_lines(value: Any, path: str = "") -> list[str]:
    """A canonical model request as lines a person can diff: one line per field
    (``messages[2].content: …``), multi-line text indented under its field."""
    if isinstance(value, dict):
        return [line for k in sorted(value) for line in request_lines(value[k], f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        if not value:
            return [f"{path}: []"]
        return [line for i, item in enumerate(value) for line in request_lines(item, f"{path}[{i}]")]
    if isinstance(value, str) and "\n" in value:
        return [f"{path}:", *(f"    {line}" for line in value.splitlines())]
    return [f"{path}: {json.dumps(value, ensure_ascii=False)}"]


def drift_card(drift: Any) -> DriftCard:
    """``drift`` (triage.drift.Drift) as the page shows it, with a unified diff of the
    recorded and the rebuilt request."""
    import difflib

    diff: list[DiffLine] = []
    if drift.rebuilt_request is not None:
        lines = difflib.unified_diff(
            request_lines(drift.recorded_request),
            request_lines(drift.rebuilt_request),
            f"recorded {drift.recorded_sha256[:12]}",
            f"rebuilt {drift.rebuilt_sha256[:12]}",
            n=2,
            lineterm="",
        )
        for line in lines:
            kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
            if line.startswith(("+++", "---")):
                kind = "hunk"
            diff.append(DiffLine(kind, _clip(line, 2000)))
            if len(diff) >= MAX_DIFF_LINES:
                diff.append(DiffLine("hunk", f"… (the diff goes on; the first {MAX_DIFF_LINES} lines are shown)"))
                break
    return DriftCard(
        key=drift.key,
        step=drift.step,
        recorded_sha256=drift.recorded_sha256,
        rebuilt_sha256=drift.rebuilt_sha256,
        accepted=drift.accepted,
        diff=diff,
        rebuilt_known=drift.rebuilt_request is not None,
    )


def notes_view(execution: Execution) -> dict[str, Any]:
    """The progress notes as the execution page shows them: goal, constraints (verbatim),
    verified facts with their sources, hypotheses, open questions (the notes' and each
    compaction's), next action, and the progress notes of compacted agent rounds."""
    context = execution.context if isinstance(execution.context, dict) else {}
    notes = context.get("notes") or {}
    folds = [
        {"slot": slot, **record}
        for slot, agent in sorted((context.get("agents") or {}).items())
        for record in (agent or {}).get("compactions", [])
    ]
    return {
        "goal": notes.get("goal", ""),
        "constraints": [*notes.get("constraints", []), *notes.get("requested", [])],
        "facts": notes.get("facts", []),
        "hypotheses": notes.get("hypotheses", [])[-5:],
        "open_questions": [*notes.get("open_questions", []), *(q for f in folds for q in f.get("open_questions", []))],
        "next_action": notes.get("next_action", ""),
        "compactions": folds,
    }
