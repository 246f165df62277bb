"""Plays one fuzz case on keel's real processes (S60) and returns what happened.

``Fuzzer(stack, people, tmp)`` holds a test's own ``Stack`` with beat running; ``play(case)``:

1. renders the case's module into ``tmp`` and starts a web server and the case's workers
   with ``KEEL_WORKFLOW_MODULES`` naming the loader (``loader``) and ``KEEL_FUZZ_FLOW`` the
   file, so every process imports exactly the text a failure prints;
2. empties the sandbox, sets its order service's mode and the case's faults;
3. starts the executions through the API (each posted twice with its idempotency key when
   the schedule says so), then, until everything is terminal or legitimately parked for
   ``QUIET_SECONDS`` (or ``CASE_SECONDS`` pass): decides what awaits a manager (as the
   manager, the verdicts of the case, each delivered again under the same or a new event
   id), signals what waits for a signal the case sends (the same, again), rings
   ``executions.advance`` again for live executions (duplicated Celery messages), and lets
   the crew kill and replace workers (``crew``);
4. reads the record (the API's executions, ``/_stats`` of the sandbox), stops the processes
   and cancels what is left, so the next case starts from nothing live.

The invariants are checked by ``invariants.check`` on what ``play`` returns.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.utils.dateparse import parse_datetime

from executions.tasks import advance
from tests.support.procs import http

from .api import Answers, Api, event_id
from .crew import Crew
from .render import child_name, render
from .specs import ENDPOINTS, Agent, Approve, Case, StepInfo, Wait, steps_of

# A case that hasn't settled by then is stalled (a violation).
CASE_SECONDS = 90
# Everything terminal or parked this long, and nothing changed: the case is over.
QUIET_SECONDS = 2.0
TICK = 0.25
TERMINAL = {"completed", "failed", "cancelled"}
LOADER = "tests.support.fuzz.loader"


@dataclass
class Played:
    """What one case's run did and left: the input of the invariants."""

    case: Case
    name: str
    source: str
    module: Path
    executions: dict[str, dict] = field(default_factory=dict)  # ref → as the API shows it at the end
    started: list[str] = field(default_factory=list)  # refs the starts answered, in order
    restarted: list[tuple[str, int, str]] = field(default_factory=list)  # (ref, code, ref answered) of repeats
    kills: list[str] = field(default_factory=list)
    unreached: list[str] = field(default_factory=list)
    died: list[str] = field(default_factory=list)
    duplicate_messages: int = 0
    # (what, ref, code, how): how = "first", or "same"/"new" for a repeat under the same or a new event id
    deliveries: list[tuple[str, str, int, str]] = field(default_factory=list)
    stalled: list[str] = field(default_factory=list)
    answers: Answers = field(default_factory=Answers)
    stats: dict[str, Any] = field(default_factory=dict)  # the sandbox's /_stats at the end
    summary: dict[str, dict] = field(default_factory=dict)  # workflow → /api/executions/summary?workflow=
    seconds: float = 0.0

    def ends(self) -> Counter:
        """How the executions ended: status, and the stuck reason of those not terminal."""
        return Counter(
            e["status"] + (f" ({e['stuck']['reason']})" if e.get("stuck") else "") for e in self.executions.values()
        )

    def line(self) -> str:
        """One line for a long run's log."""
        statuses = self.ends()
        shown = ", ".join(f"{n} {s}" for s, n in statuses.most_common())
        return f"{self.name} {self.seconds:.1f} s: {len(self.executions)} executions ({shown}), {len(self.kills)} kills"

    @property
    def workflows(self) -> list[str]:
        return [self.name, child_name(self.name)] if self.case.has_children else [self.name]


@dataclass
class Figures:
    """What a fuzz session did, summed over its cases (printed by ``make fuzz``)."""

    cases: int = 0
    executions: int = 0
    kills: int = 0
    duplicate_messages: int = 0
    duplicate_deliveries: int = 0
    decisions: int = 0
    signals: int = 0
    effects: int = 0
    requests: int = 0
    statuses: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def add(self, played: Played) -> None:
        self.cases += 1
        self.executions += len(played.executions)
        self.kills += len(played.kills)
        self.duplicate_messages += played.duplicate_messages
        self.duplicate_deliveries += sum(1 for *_, how in played.deliveries if how != "first")
        self.decisions += sum(
            1 for what, *_, how in played.deliveries if what.startswith("decision") and how == "first"
        )
        self.signals += sum(1 for what, *_, how in played.deliveries if what.startswith("signal") and how == "first")
        self.effects += sum(v["effects"] for v in played.stats.get("keys", {}).values())
        self.requests += sum(played.answers.codes.values())
        self.statuses.update(played.ends())
        self.seconds += played.seconds

    def __str__(self) -> str:
        statuses = ", ".join(f"{n} {s}" for s, n in self.statuses.most_common())
        return (
            f"{self.cases} workflows run in {self.seconds:.0f} s: {self.executions} executions ({statuses}), "
            f"{self.kills} workers SIGKILLed, {self.duplicate_messages} duplicated advance messages, "
            f"{self.decisions} decisions and {self.signals} signals (+{self.duplicate_deliveries} delivered again), "
            f"{self.effects} provider effects, {self.requests} API requests"
        )


class Fuzzer:
    def __init__(self, stack, people, tmp: Path) -> None:
        self.stack = stack
        self.people = people
        self.tmp = tmp
        (tmp / "flows").mkdir(parents=True, exist_ok=True)
        self.cases = 0
        self.beat = stack.beat()

    def play(self, case: Case) -> Played:
        self.cases += 1
        name = f"fz{self.cases:04d}"
        source = render(case, name)
        module = self.tmp / "flows" / f"{name}.py"
        module.write_text(source)
        played = Played(case=case, name=name, source=source, module=module)
        env = {"KEEL_WORKFLOW_MODULES": LOADER, "KEEL_FUZZ_FLOW": str(module)}
        for marker in Path(self.stack.failpoint_dir).glob("*"):
            marker.unlink()
        self._prepare_sandbox(case)
        crew = Crew(self.stack, env, name, case.schedule.workers, list(case.schedule.kills))
        with self.stack.together():
            web = self.stack.web(**env)
            crew.start()
        began = time.monotonic()
        try:
            apis = {who: Api(self.stack.web_url, self.people[who].token, played.answers) for who in self.people}
            _Play(played, apis, crew).run()
            played.stats = http().get(f"{self.stack.sandbox_url}/_stats", timeout=30).json()
            for workflow in played.workflows:
                played.summary[workflow] = _settled_summary(apis["operator"], workflow, played)
        finally:
            played.seconds = time.monotonic() - began
            played.kills, played.unreached, played.died = crew.kills, crew.unreached(), crew.died
            crew.stop()
            self._cancel_what_is_left(played)
            web.kill()
        return played

    def _prepare_sandbox(self, case: Case) -> None:
        self.stack.run_sandbox.reset()
        session = http()
        answer = session.post(
            f"{self.stack.sandbox_url}/_config", json={"orders_idempotent": case.schedule.orders_dedupe}, timeout=10
        )
        assert answer.status_code == 200, answer.text
        for fault, provider in case.schedule.faults:
            body = {"endpoint": ENDPOINTS[provider], "fault": fault, "count": 1, "retry_after": 1, "hang_seconds": 4}
            answer = session.post(f"{self.stack.sandbox_url}/_faults", json=body, timeout=10)
            assert answer.status_code in (200, 201), answer.text

    def _cancel_what_is_left(self, played: Played) -> None:
        """Cancel every execution the case left live (parents first: a cancel cascades), so
        no later case's worker meets a workflow it doesn't know. Answers are recorded."""
        operator = Api(self.stack.web_url, self.people["operator"].token, played.answers)
        for workflow in played.workflows:
            for item in operator.executions(workflow):
                if item["status"] not in TERMINAL:
                    operator.post(f"/executions/{item['id']}/cancel", {"reason": "fuzz: the case is over"})


def _settled_summary(api: Api, workflow: str, played: Played, timeout: float = 10) -> dict:
    """``/api/executions/summary?workflow=`` once it agrees with the executions read (the
    counts of terminal executions come from a tally beat refreshes): the last one read."""
    expected = Counter(e["status"] for e in played.executions.values() if e["workflow"] == workflow)
    ends = time.monotonic() + timeout
    while True:
        summary = api.get(f"/executions/summary?workflow={workflow}") or {}
        counted = Counter({s: n for s, n in summary.get("by_status", {}).items() if n})
        if counted == expected or time.monotonic() > ends:
            return summary
        time.sleep(0.5)


class _Play:
    """One run of a case, tick by tick."""

    def __init__(self, played: Played, apis: dict[str, Api], crew: Crew) -> None:
        self.played = played
        self.case = played.case
        self.apis = apis
        self.crew = crew
        self.steps: dict[str, dict[str, StepInfo]] = {
            played.name: {s.name: s for s in steps_of(self.case.main, "s")},
            child_name(played.name): {s.name: s for s in steps_of(self.case.child, "c")},
        }
        self.decided: set[int] = set()  # approval ids decided (202)
        self.verdicts: Counter = Counter()  # (ref, gate step) → verdicts delivered
        self.signalled: set[tuple[str, str, str]] = set()  # (ref, step, since) of waits signalled (202)
        self.messages = self.case.schedule.duplicate_messages

    def run(self) -> None:
        self._start()
        began = time.monotonic()
        quiet_since, seen = None, None
        while True:
            items = {e["id"]: e for w in self.played.workflows for e in self.apis["requester"].executions(w)}
            self.played.executions = items
            for item in items.values():
                self._act(item)
            moving = [ref for ref, item in items.items() if self._moving(item, items)]
            self._ring_again(items)
            self.crew.tend(moving=bool(moving))
            state = sorted((ref, e["status"], e["current_step"]) for ref, e in items.items())
            if moving or state != seen:
                quiet_since, seen = None, state
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= QUIET_SECONDS:
                return
            if time.monotonic() - began > CASE_SECONDS:
                self.played.stalled = [f"{r} {items[r]['status']} at {items[r]['current_step']}" for r in moving]
                return
            time.sleep(TICK)

    def _start(self) -> None:
        requester = self.apis["requester"]
        for n in range(1, self.case.schedule.starts + 1):
            body = {
                "workflow": self.played.name,
                "input": {"tag": f"e{n}"},
                "idempotency_key": f"{self.played.name}-{n}",
            }
            answer = requester.post("/executions", body)
            assert answer is not None and answer.status_code == 201, answer and answer.text
            ref = answer.json()["id"]
            self.played.started.append(ref)
            if self.case.schedule.restart_start:
                again = requester.post("/executions", body)
                if again is not None:
                    self.played.restarted.append((ref, again.status_code, (again.json() or {}).get("id", "")))

    # --- what a person does

    def _act(self, item: dict) -> None:
        step = self.steps[item["workflow"]].get(item["current_step"] or "")
        if step is None:
            return
        if (
            item["status"] == "awaiting_approval"
            and item["pending_approval"]
            and isinstance(step.block, Approve | Agent)
        ):
            self._decide(item, step.block)
        gate = item.get("pending_gate") or {}
        signalled = isinstance(step.block, Wait) and step.block.signal and step.block.send
        if item["status"] == "waiting" and gate.get("kind") == "wait" and signalled:
            self._signal(item, step, gate)

    def _decide(self, item: dict, block: Approve | Agent) -> None:
        approval = item["pending_approval"]
        if approval["id"] in self.decided:
            return
        ref, at = item["id"], (item["id"], item["current_step"])
        n = self.verdicts[at]
        verdict = block.decisions[n] if n < len(block.decisions) else "approve"
        manager, first = self.apis["manager"], event_id()
        answer = manager.decide(ref, approval, verdict, first)
        self.played.deliveries.append((f"decision {verdict}", ref, _code(answer), "first"))
        if answer is None or answer.status_code != 202:
            return  # not taken (the state moved): seen again at the next tick
        self.decided.add(approval["id"])
        self.verdicts[at] += 1
        how = "same" if block.same_event else "new"
        for _ in range(block.duplicates):
            again = manager.decide(ref, approval, verdict, first if block.same_event else event_id())
            self.played.deliveries.append((f"decision {verdict}", ref, _code(again), how))

    def _signal(self, item: dict, step: StepInfo, gate: dict) -> None:
        ref = item["id"]
        opened = (ref, step.name, str(gate.get("since")))
        if opened in self.signalled:
            return
        name = "go_" + step.name.removesuffix("_wait")
        requester, first = self.apis["requester"], event_id()
        answer = requester.signal(ref, name, first)
        self.played.deliveries.append((f"signal {name}", ref, _code(answer), "first"))
        if answer is None or answer.status_code != 202:
            return
        self.signalled.add(opened)
        how = "same" if step.block.same_event else "new"
        for _ in range(step.block.duplicates):
            again = requester.signal(ref, name, first if step.block.same_event else event_id())
            self.played.deliveries.append((f"signal {name}", ref, _code(again), how))

    # --- what the machinery does

    def _ring_again(self, items: dict[str, dict]) -> None:
        """One duplicated ``executions.advance`` a tick, for a live execution, until the
        schedule's are spent (S13: two workers get the same message)."""
        live = sorted(ref for ref, e in items.items() if e["status"] not in TERMINAL)
        if self.messages > 0 and live:
            ref = live[self.messages % len(live)]
            advance.delay(int(ref.removeprefix("RUN_")))
            self.messages -= 1
            self.played.duplicate_messages += 1

    def _moving(self, item: dict, items: dict[str, dict]) -> bool:
        """Whether ``item`` is still on its way (by itself or by what this run will do): not
        terminal, not parked for a person, not waiting for what will never come."""
        status = item["status"]
        if status in TERMINAL or status in ("needs_attention", "paused"):
            return False
        if status == "awaiting_approval":
            return item["pending_approval"] is not None
        if status != "waiting":
            return True  # pending, running, retry_pending
        gate = item.get("pending_gate")
        if gate is None:
            return False  # waiting for nothing: parked (the invariants say whether it says why)
        if gate["kind"] == "children":
            kids = [items.get(c["id"]) for c in item["children"] if c["step"] == gate["step"]]
            return any(k is None or self._moving(k, items) for k in kids) or all(
                k is not None and k["status"] in TERMINAL for k in kids
            )
        step = self.steps[item["workflow"]].get(gate["step"])
        if step is None or not isinstance(step.block, Wait) or not step.block.signal or step.block.send:
            return True  # a timer, or a signal this run sends
        # A signal that won't come: moving until its timeout is near past (the wait gate keeps that
        # time, ``pending_gate.until``; the sweeper then flags it), so the case never ends mid-timeout.
        until = item.get("due_at") or gate.get("until")
        due = parse_datetime(until) if until else None
        return due is not None and due - dt.datetime.now(dt.UTC) < dt.timedelta(seconds=10)


def _code(answer) -> int:
    return answer.status_code if answer is not None else 0
