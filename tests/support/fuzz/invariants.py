"""What must hold after any fuzz case, whatever the workflow and whatever was killed or
duplicated (S60; docs/design.md §4, "Guarantees for any workflow"). ``check(played)`` returns
one sentence per violation (none: the case passed):

- **each effect key, at most one provider effect**: the sandbox's ``/_stats`` per
  ``Idempotency-Key`` (a provider that doesn't de-duplicate counts every order);
- **each approval, at most one guarded effect**: the ledger's actions grouped by what
  authorised them (``gate_ref``) and step, counting those that went out or may have
  (succeeded, executing, unknown); and no effect of a tool that needs an approval goes
  out without one (the model proposing an approved call again);
- **nothing hangs without a reason**: every execution not terminal has a live lease, a
  due time or a stuck reason, or waits for something that exists — a pending approval a
  manager can decide, a signal until its timeout (the wait gate's ``until``: a signal
  wait keeps its timeout on the gate, not in the row's ``due_at``), a child not yet
  terminal; and none is still moving when the case's time is up (stalled);
- **no 5xx**: every answer of the web server over the case, and every request answered;
  a decision or a signal answered 202 or 409 (a repeat under the same event id: 202, the
  first answer again; under a new one: 409, or 429 past a burst of refused decisions);
- **the counts add up**: a succeeded action is exactly one effect at its provider and a
  failed one none; every effect the provider counted has its ledger action; a completed
  execution has one succeeded action per effect step, one per agent step whose tool call
  was approved (however often the model proposed it again), and its children completed; one
  execution per idempotency key; ``/api/executions/summary`` counts what the list shows;
- **unknown is not failed**: no execution ended (failed or completed) with an action of
  its own still in doubt (executing or unknown): it may have acted, so a person or a
  reconciliation establishes the outcome before the execution ends;
- and no worker exited on its own (a SIGKILL is a kill, whoever sent it).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

from django.db.models import Count
from django.utils.dateparse import parse_datetime

from executions.models import Action

from .render import child_name
from .runner import TERMINAL, Played
from .specs import Agent, Children, steps_of

# What the ledger says went out, or may have.
SENT = (Action.State.SUCCEEDED, Action.State.EXECUTING, Action.State.UNKNOWN)


def check(played: Played) -> list[str]:
    return [
        *server_answers(played),
        *processes(played),
        *effect_keys(played),
        *approvals_spent_once(played),
        *nothing_hangs(played),
        *counts_add_up(played),
        *nothing_ends_in_doubt(played),
    ]


def server_answers(played: Played) -> list[str]:
    found = [f"the web server: {bad}" for bad in played.answers.bad]
    # A repeat under a new event id is refused (409), or, past a burst of refusals, limited (429:
    # approvals.throttle); a valid first decision is never limited.
    expected = {"first": {202, 409}, "same": {202}, "new": {409, 429}}
    for what, ref, code, how in played.deliveries:
        if code and code not in expected[how]:
            again = "" if how == "first" else f" again under the {how} event id"
            found.append(f"{what} for {ref}{again} answered {code} (expected {sorted(expected[how])})")
    return found


def processes(played: Played) -> list[str]:
    return [f"a worker exited on its own: {died}" for died in played.died]


def effect_keys(played: Played) -> list[str]:
    return [
        f"effect key {key}: {seen['effects']} provider effects ({seen['calls']} calls)"
        for key, seen in sorted(played.stats.get("keys", {}).items())
        if seen["effects"] > 1
    ]


def _actions(played: Played):
    return Action.objects.filter(execution__workflow__in=played.workflows, beside=False)


def approvals_spent_once(played: Played) -> list[str]:
    spent = (
        _actions(played)
        .exclude(gate_ref="")
        .filter(status__in=SENT)
        .values("gate_ref", "step")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    found = [f"{row['gate_ref']} let {row['n']} effects of step {row['step']} through" for row in spent]
    # Every tool of an agent block needs an approval: none of its effects may go out unauthorised.
    agents = {s.name for s in steps_of(played.case.main, "s") + steps_of(played.case.child, "c") if s.kind == "agent"}
    unauthorised = _actions(played).filter(step__in=agents, gate_ref="", status__in=SENT)
    found += [f"{a.key} ({a.status}) went out at {a.step} without the approval its tool needs" for a in unauthorised]
    return found


def nothing_hangs(played: Played) -> list[str]:
    found = [f"stalled: {what} still moving after the case's time" for what in played.stalled]
    now = dt.datetime.now(dt.UTC)
    items = played.executions
    for ref, item in sorted(items.items()):
        status = item["status"]
        if status in TERMINAL or item["due_at"] or item["stuck"]:
            continue
        lease = item.get("lease")
        if lease and parse_datetime(lease["expires_at"]) > now - dt.timedelta(seconds=1):
            continue
        if status == "awaiting_approval" and item["pending_approval"]:
            continue  # a manager can decide it
        gate = item.get("pending_gate") or {}
        if status == "waiting" and gate.get("kind") == "wait" and gate.get("until"):
            continue  # a signal, until its timeout (the wait gate keeps that due time, not the row)
        kids = [c for c in item["children"] if c["step"] == gate.get("step")]
        if status == "waiting" and gate.get("kind") == "children" and any(c["status"] not in TERMINAL for c in kids):
            continue  # a child it waits for is not done
        found.append(
            f"{ref} ({item['workflow']}) is {status} at {item['current_step']} with no live lease, no due time, "
            "no stuck reason and nothing it waits for"
        )
    return found


def nothing_ends_in_doubt(played: Played) -> list[str]:
    doubtful = _actions(played).filter(status__in=(Action.State.EXECUTING, Action.State.UNKNOWN))
    return ended_in_doubt(
        played.executions, [(a.execution.ref, a.key, a.status) for a in doubtful.select_related("execution")]
    )


def ended_in_doubt(executions: dict[str, dict], doubtful: list[tuple[str, str, str]]) -> list[str]:
    """(ref, key, status) of each action in doubt → a sentence for each whose execution ended."""
    return [
        f"{ref} ended {executions[ref]['status']} with {key} {status}"
        for ref, key, status in doubtful
        if ref in executions and executions[ref]["status"] in ("failed", "completed")
    ]


def counts_add_up(played: Played) -> list[str]:
    found: list[str] = []
    keys = played.stats.get("keys", {})
    actions = list(_actions(played).select_related("execution"))
    for action in actions:
        effects = keys.get(action.key, {}).get("effects", 0)
        if action.status == Action.State.SUCCEEDED and effects != 1:
            found.append(f"action {action.key} succeeded, the provider counted {effects} effects")
        if action.status == Action.State.FAILED and effects != 0:
            found.append(f"action {action.key} failed, the provider counted {effects} effects")
    ledger = {a.key for a in actions}
    found += [
        f"effect key {k}: an effect without a ledger action"
        for k, v in keys.items()
        if v["effects"] and k not in ledger
    ]
    found += _completed(played, actions)
    found += _starts(played)
    for workflow, summary in sorted(played.summary.items()):
        shown = Counter(e["status"] for e in played.executions.values() if e["workflow"] == workflow)
        counted = Counter({s: n for s, n in summary.get("by_status", {}).items() if n})
        if counted != shown:
            found.append(f"/api/executions/summary?workflow={workflow} counts {dict(counted)}, the list {dict(shown)}")
    return found


def _completed(played: Played, actions: list[Action]) -> list[str]:
    found: list[str] = []
    succeeded = Counter((a.execution.ref, a.step) for a in actions if a.status == Action.State.SUCCEEDED)
    flows = {played.name: (played.case.main, "s"), child_name(played.name): (played.case.child, "c")}
    for ref, item in sorted(played.executions.items()):
        if item["status"] != "completed":
            continue
        flow, prefix = flows[item["workflow"]]
        for step in steps_of(flow, prefix):
            passes = getattr(step.block, "passes", 1)
            if step.kind == "effect" and succeeded[(ref, step.name)] != passes:
                found.append(
                    f"{ref} completed with {succeeded[(ref, step.name)]} succeeded actions at {step.name} "
                    f"({passes} visit(s))"
                )
            if (
                isinstance(step.block, Agent)
                and step.block.decisions[-1] == "approve"
                and succeeded[(ref, step.name)] != 1
            ):
                found.append(f"{ref} completed with {succeeded[(ref, step.name)]} approved tool effects at {step.name}")
            if isinstance(step.block, Children):
                kids = [c for c in item["children"] if c["step"] == step.name]
                if len(kids) != step.block.count or any(c["status"] != "completed" for c in kids):
                    found.append(f"{ref} completed past {step.name} with children {kids} (declared {step.block.count})")
    return found


def _starts(played: Played) -> list[str]:
    found = []
    if len(set(played.started)) != len(played.started):
        found.append(f"two starts under different idempotency keys answered the same execution: {played.started}")
    for ref, code, answered in played.restarted:
        if (code, answered) != (200, ref):
            found.append(f"a start repeated with its idempotency key answered {code} {answered} (first: 201 {ref})")
    mains = [ref for ref, e in played.executions.items() if e["workflow"] == played.name]
    if sorted(mains) != sorted(played.started):
        found.append(f"{len(played.started)} starts, {len(mains)} executions of {played.name} listed")
    return found


def report(played: Played, violations: list[str]) -> str:
    """What a failure prints: the violations, the case and its schedule, the module."""
    lines = [
        f"S60: the generated workflow {played.name} broke {len(violations)} invariant(s):",
        *(f"  - {v}" for v in violations),
        "",
        f"Played in {played.seconds:.1f} s. Kills: {', '.join(played.kills) or 'none'}"
        + (f"; not reached: {', '.join(played.unreached)}" if played.unreached else "")
        + f"; duplicated advance messages: {played.duplicate_messages}.",
        "Executions at the end: "
        + ", ".join(f"{r} {e['status']} at {e['current_step'] or '-'}" for r, e in sorted(played.executions.items())),
        "The ledger (key, step, status, authorised by; the provider's effects):",
        *(
            f"  {a.key} {a.step} {a.status} {a.gate_ref or '-'}; {played.stats.get('keys', {}).get(a.key, {}).get('effects', 0)}"
            for a in _actions(played).order_by("id")
        ),
        "",
        f"The workflow module ({played.module}), as every process imported it:",
        "",
        played.source,
    ]
    return "\n".join(lines)
