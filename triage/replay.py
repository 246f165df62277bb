"""Replay before deploy (docs/design.md §4; ``keel replay``): for each live execution, run again what
it has already done with the code now installed, and report the first place where what
the code builds now differs from what was recorded — before a deploy stops it.

Inside a replay:

- the model is the journal (``JournalModel``): each call's request is rebuilt and hashed
  as the runtime would (``ModelRequest.canonical``) and compared with the recorded
  call of the same key; the recorded answer is returned, no provider is ever asked. A
  different hash is a ``model_call`` finding naming which parts of the request differ;
- an effect is built (its step function returns an ``Effect``) and never performed: its
  key and arguments are compared with the ledger's row (``effect``);
- an approval gate compares what it is bound to (the artifact version's sha256 and the
  action of the recorded request) with what the code builds now (``approval``);
- no request leaves (``executions.authoring.http.offline``: a compute step that would
  call a service keeps its recorded output), artifacts are hashed and never stored,
  and everything runs in a transaction rolled back at the end: a replay writes nothing.

- agent and route steps run again with the journal as their model (every rebuilt
  request compared), the record answering for their tools (executions.agent.replaying);
  the current step as far as the record goes;
- the step graph is compared with the record first (``structure``): the execution's
  position gone, a step it ran removed or renamed, a step now before its position that
  it never ran (inserted), or its position no longer on the code's path.

A pinned version no longer registered is the verdict ``unregistered_version``
(finding ``version``). ``against=N`` replays an execution pinned to an older version
against version N's code, to see what moving it would break.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
from typing import Any

from django.db import transaction
from django.db.models import Q

from approvals.models import ApprovalRequest
from executions import runtime, visits
from executions.authoring import notes as progress_notes
from executions.authoring import registry
from executions.authoring.http import offline
from executions.authoring.modelcalls import ModelRequest, canonical_json
from executions.authoring.step_context import StepContext
from executions.authoring.workflow import StepKind, Workflow
from executions.models import TERMINAL, Action, Execution, ExecutionEvent, ModelCall

from .network_guard import guarded

OK, DRIFT, UNREGISTERED = "ok", "drift", "unregistered_version"
# The engine's own kinds, replayed (a method of ``_Replay``): a compute step runs offline
# (its record stands if it can't); an effect is built and compared with the ledger; a
# branch must choose as it did. A gate checks what it is bound to; every kind that plugs
# in (model, agent, route: executions.engine.kinds) replays itself with the journal as
# its model (``StepHandler.replay``). tests/unit/test_step_kinds.py checks every kind is
# covered.
REPLAYS = {
    StepKind.COMPUTE: "_replay_compute",
    StepKind.EFFECT: "_check_effect",
    StepKind.BRANCH: "_check_branch",
}


class Found(Exception):
    """The first finding of a replay: it stops there."""

    def __init__(self, kind: str, step: str, key: str, detail: str) -> None:
        super().__init__(detail)
        self.finding = {"kind": kind, "step": step, "key": key, "detail": detail}


def replay(
    refs: list[str] | None = None,
    *,
    workflow: str | None = None,
    against: int | None = None,
    version: int | None = None,
) -> dict:
    """Every selected non-terminal execution (default: all; ``version``: only those pinned
    to it), replayed; the answer of ``keel replay --json``. Writes nothing (a transaction
    rolled back at the end)."""
    executions = Execution.objects.exclude(status__in=TERMINAL).order_by("pk")
    if refs:
        executions = executions.filter(pk__in=[int(ref.removeprefix("RUN_")) for ref in refs])
    if workflow:
        executions = executions.filter(workflow=workflow)
    if against is not None:
        executions = executions.exclude(workflow_version=against)
    if version is not None:
        executions = executions.filter(workflow_version=version)
    items = []
    with transaction.atomic():
        for execution in executions:
            items.append(replay_one(execution, against=against))
        transaction.set_rollback(True)
    return {"checked": len(items), "drifted": sum(1 for i in items if i["verdict"] != OK), "items": items}


@guarded  # no outbound network: a step that reaches for it is refused at the socket, and reported
def replay_one(execution: Execution, *, against: int | None = None) -> dict:
    version = against or execution.workflow_version
    item = {"id": execution.ref, "workflow": execution.workflow, "workflow_version": execution.workflow_version}
    try:
        flow = registry.get(execution.workflow, version)
    except registry.UnknownWorkflow:
        known = ", ".join(f"v{v}" for v in registry.versions(execution.workflow)) or "none"
        detail = f"{execution.workflow} v{version} is not registered in the code now installed (registered: {known})"
        finding = {"kind": "version", "step": execution.current_step, "key": "", "detail": detail}
        return {**item, "verdict": UNREGISTERED, "findings": [finding]}
    try:
        with offline():
            _Replay(execution, flow).run()
    except Found as found:
        return {**item, "verdict": DRIFT, "findings": [found.finding]}
    return {**item, "verdict": OK, "findings": []}


class _Replay:
    def __init__(self, execution: Execution, flow: Workflow) -> None:
        self.recorded = execution
        self.flow = flow
        self.names = [s.name for s in flow.steps]
        # A copy the steps read, its context rebuilt step by step; the recorded row is never changed.
        self.execution = copy.copy(execution)
        recorded = execution.context or {}
        self.state: dict[str, Any] = execution.outputs()
        self.notes: dict[str, Any] = recorded.get("notes") or progress_notes.initial(goal="", constraints=[])
        self.latest_artifacts: dict[str, Any] = recorded.get("artifacts", {})
        self.built: dict[str, str] = {}  # artifact name → sha256 of what the code builds now
        self.done: list[visits.Visit] = []  # every visit it made (run() reads them)
        self.rewinds: list[tuple[Any, Any]] | None = None  # the changes requested (_constraints_at)

    def run(self) -> None:
        current = self.recorded.current_step
        ref, flow = self.recorded.ref, f"{self.flow.name} v{self.flow.version}"
        if current and current not in self.names:
            raise Found(
                "structure", current, "", f"{ref} is at step {current}, which {flow} doesn't have (removed or renamed)"
            )
        gone = next((name for name in self.state if name not in self.names), None)
        if gone is not None:
            raise Found("structure", gone, "", f"{ref} ran {gone}, which {flow} no longer has (removed or renamed)")
        path = self.flow.path(self.state)  # the steps the code takes now, following the recorded choices
        names = [step.name for step in path]
        if current and current not in names:
            raise Found(
                "structure",
                current,
                "",
                f"{ref} is at {current}, which the steps of {flow} no longer lead to ({' → '.join(names)})",
            )
        upto = names.index(current) if current else len(names)
        for step in path[:upto]:
            if step.name not in self.state:
                raise Found(
                    "structure",
                    step.name,
                    "",
                    f"{step.name} now comes before {current} in {flow}, but {ref} never ran it (a step inserted, "
                    "or renamed): it would go on past it",
                )
        # Each visit it made, in order, with the context as it stood then (a loop's later visits
        # too); a visit a restart carried over was made by the execution it continues.
        done = self.done = visits.done(self.flow, self.recorded)
        for index, visit in enumerate(done):
            if visit.run is not None:
                self._replay_step(done[:index], visit)
        if current:
            step = self.flow.get_step(current)
            coming = visits.ahead(self.flow, self.recorded, done)
            visit = coming[0] if coming else visits.Visit(step, 1)
            self._replay_current(done, visit)

    # --- the context as it was when a visit began, after the visits ``earlier``

    def _context(
        self, earlier_visits: list[visits.Visit], visit: visits.Visit, *, current: bool = False
    ) -> StepContext:
        step = visit.step
        earlier = {v.name for v in earlier_visits}
        self.execution.round = self.recorded.round if current or visit.run is None else visit.run.round
        self.execution.current_step = step.name  # ctx.visit: this one
        notes = dict(self.notes)
        notes["constraints"] = self._constraints_at(visit)
        notes["facts"] = [
            f
            for f in self.notes.get("facts", [])
            if f.get("step") in earlier and self._before(f.get("round"), f.get("step", ""), visit)
        ]
        notes["hypotheses"] = [h for h in self.notes.get("hypotheses", []) if self._heard_before(h, earlier, visit)]
        names = [v.name for v in earlier_visits]
        completed = list(self.notes.get("completed_steps", []))
        notes["completed_steps"] = names if completed[: len(names)] == names else [s for s in completed if s in earlier]
        notes["next_action"] = self._next_action_after(earlier_visits[-1]) if earlier_visits else ""
        artifacts = {}
        for name, ref in self.latest_artifacts.items():
            version = visits.produced_before(ref, earlier_visits, self.done)
            if version is not None:
                artifacts[name] = version.as_ref()
        outputs: dict[str, Any] = {}
        seen: dict[str, list[Any]] = {}
        for v in earlier_visits:
            outputs[v.name] = v.output
            seen.setdefault(v.name, []).append(v.output)
        self.execution.context = {**(self.recorded.context or {}), "notes": notes, "artifacts": artifacts}
        self.execution.show_outputs(outputs, visits=seen)
        return _ReplayContext(execution=self.execution, workflow=self.flow, built=self.built)

    # --- each kind of step

    def _replay_step(self, earlier: list[visits.Visit], visit: visits.Visit) -> None:
        """One visit, replayed by its kind (``REPLAYS``, a gate's check, or the kind's own
        replay); a kind nothing knows is a finding, never skipped."""
        step = visit.step
        if step.is_gate:
            self._check_gate(earlier, visit)
        elif step.kind in REPLAYS:
            getattr(self, REPLAYS[step.kind])(earlier, visit)
        else:
            self._replay_plugged(earlier, visit)

    def _replay_current(self, earlier: list[visits.Visit], visit: visits.Visit) -> None:
        """The step the execution stands at, as far as the record goes: a gate it is parked
        at (what it is bound to, and the effects it guards, as planned); a kind that plugs
        in (a model, agent or route step) up to its first call not made yet; nothing else
        has run any of it."""
        step = visit.step
        if step.is_gate:
            self._check_gate(earlier, visit)
            for guarded in self.flow.steps:
                if guarded.kind == StepKind.EFFECT and guarded.guarded_by == step.name:
                    self._check_effect(earlier, visits.Visit(guarded, 0), planned=True)
        elif step.kind == StepKind.EFFECT:  # the effect it stands at: as the ledger has it, if it does
            self._check_effect(earlier, visit, planned=True)
        elif step.kind not in REPLAYS:
            self._replay_plugged(earlier, visit, current=True)

    def _replay_plugged(self, earlier: list[visits.Visit], visit: visits.Visit, *, current: bool = False) -> None:
        """A kind that plugs in, run again by its own ``replay`` with the journal as its model."""
        step = visit.step
        try:
            kind = runtime.step_kind(step.kind)
        except LookupError:
            raise Found("structure", step.name, "", f"replay doesn't know the step kind {step.kind!r}") from None
        ctx = self._context(earlier, visit, current=current)
        model = JournalModel(self.execution, step.name, current=current)
        try:
            kind.replay(ctx, self.flow, step, model=model, recorded=None if current else (visit.output or {}))
        except runtime.ReplayEnded:
            pass  # the current step got no further than this
        except runtime.ReplayDrift as drift:
            raise Found(drift.kind, step.name, drift.key, drift.detail) from None

    def _replay_compute(self, earlier: list[visits.Visit], visit: visits.Visit) -> None:
        ctx = self._context(earlier, visit)
        # It would call a service, or depends on what a call returned: its record stands.
        with contextlib.suppress(Exception):
            visit.step.fn(ctx)

    def _check_branch(self, earlier: list[visits.Visit], visit: visits.Visit) -> None:
        """A branch's code, run again on what it saw in this visit, must choose what the
        record says: otherwise the execution would go on along another path."""
        step = visit.step
        ctx = self._context(earlier, visit)
        recorded = (visit.output or {}).get("next")
        try:
            chosen = step.fn(ctx)
        except Exception:  # it depends on what a call returned: its record stands
            return
        if chosen != recorded:
            now, was = chosen or "the end", recorded or "the end"
            which = f" (visit {visit.visit})" if visit.visit > 1 else ""
            raise Found(
                "structure",
                step.name,
                "",
                f"{step.name}{which} now chooses {now!r} where {self.recorded.ref} chose {was!r}",
            )

    def _check_effect(self, earlier: list[visits.Visit], visit: visits.Visit, *, planned: bool = False) -> None:
        step = visit.step
        ctx = self._context(earlier, visit)
        try:
            effect = step.fn(ctx)
        except Found:
            raise
        except Exception as exc:
            raise Found(
                "effect", step.name, "", f"the effect can't be built any more: {type(exc).__name__}: {exc}"
            ) from None
        rows = list(Action.objects.filter(execution_id=self.recorded.pk, step=step.name).order_by("-created_at"))
        if effect is None:  # it decides not to act
            # What this visit sent (an action is the visit's whose run finished next after it).
            ran = [v for v in [*earlier, visit] if v.run is not None]
            mine = [row for row in rows if visits.visit_of(ran, step.name, row.created_at) == visit]
            acted = next((row for row in mine if row.status != Action.State.PLANNED), None) if not planned else None
            if acted is not None:
                raise Found(
                    "effect", step.name, acted.key, f"the effect now acts on nothing; the ledger has {acted.key}"
                )
            return
        same = next((row for row in rows if row.key == effect.key), None)
        if same is None:
            recorded = rows[0] if rows else None
            if recorded is None and planned:
                return  # nothing planned for it yet
            was = f"the ledger has {recorded.key}" if recorded else "the ledger has no action for it"
            raise Found("effect", step.name, effect.key, f"the effect's key is now {effect.key}; {was}")
        if canonical_json(same.args) != canonical_json(effect.args):
            changed = sorted(
                k
                for k in set(same.args) | set(effect.args)
                if same.args.get(k, _MISSING) != effect.args.get(k, _MISSING)
            )
            raise Found(
                "effect",
                step.name,
                effect.key,
                f"the arguments of {effect.key} differ from the ledger's in {', '.join(changed) or 'their form'}",
            )

    def _check_gate(self, earlier: list[visits.Visit], visit: visits.Visit) -> None:
        step = visit.step
        spec = step.spec
        artifact, action = getattr(spec, "artifact", None), getattr(spec, "action", None)
        if artifact is None:
            return  # a wait: it binds nothing
        requests = ApprovalRequest.objects.filter(execution_id=self.recorded.pk, step=step.name).order_by("-pk")
        if visit.run is not None:  # a visit it passed: the request of its round (each visit asks its own)
            requests = requests.filter(round__lte=visit.run.round)
        request = requests.first()
        if request is None:
            return
        key = f"approval:{request.pk}"
        if action != request.action:
            raise Found(
                "approval",
                step.name,
                key,
                f"approval #{request.pk} was asked for the action {request.action}; the gate now asks for {action}",
            )
        if request.artifact_version.artifact_id != self.latest_artifacts.get(artifact, {}).get("artifact_pk"):
            raise Found(
                "approval",
                step.name,
                key,
                f"approval #{request.pk} is bound to another artifact than {artifact!r}, which the gate now names",
            )
        built = self.built.get(artifact)
        if built is not None and built != request.content_sha256:
            raise Found(
                "approval",
                step.name,
                key,
                f"approval #{request.pk} is bound to {artifact} V{request.version} (sha256 {request.content_sha256[:12]}); "
                f"the code now builds {artifact} with sha256 {built[:12]}, a version nobody approved",
            )

    def _next_action_after(self, visit: visits.Visit) -> str:
        """What the runner wrote as the next action when ``visit`` completed: the label of
        the step its edge led to (not the step replayed now: changes requested jump back
        without writing it)."""
        try:
            following = self.flow.next_step(visit.name, visit.output)
        except KeyError:
            return visit.step.label
        return self.flow.label_for(following) if following else "done"

    def _before(self, round_: Any, step: str, visit: visits.Visit) -> bool:
        """Whether what ``step`` recorded in round ``round_`` was there when ``visit`` began
        (this round is ``self.execution.round``): an earlier round's, or this round's by
        another step (``round_`` None: recorded before rounds were kept; assumed so)."""
        if not isinstance(round_, int):
            return True
        return round_ < self.execution.round or (round_ == self.execution.round and step != visit.name)

    def _heard_before(self, hypothesis: dict[str, Any], earlier: set[str], visit: visits.Visit) -> bool:
        """Whether the model's answer ``hypothesis`` came from (its source, a call key like
        ``RUN_0001:analyze:r1:c1``) was heard before ``visit`` began."""
        parts = str(hypothesis.get("source", "")).split(":")
        if len(parts) < 4 or not parts[2].removeprefix("r").isdigit():
            return False
        step, round_ = parts[1], int(parts[2].removeprefix("r"))
        return (step in earlier or round_ < self.execution.round) and self._before(round_, step, visit)

    def _constraints_at(self, visit: visits.Visit) -> list[str]:
        """The mandatory constraints as ``visit`` saw them: all of them, less those changes
        requested later appended (each rewind appends one; its event names its round, or,
        recorded before, is later than the visit's start)."""
        constraints = list(self.notes.get("constraints", []))
        if visit.run is None:
            return constraints
        if self.rewinds is None:  # read once a replay
            rewinds = ExecutionEvent.objects.filter(execution_id=self.recorded.pk, type="transition").filter(
                Q(payload__has_key="constraint") | Q(payload__reason__startswith="changes requested on V")
            )
            self.rewinds = list(rewinds.values_list("payload", "created_at"))
        later = 0
        for payload, at in self.rewinds:
            made = payload.get("round") if isinstance(payload, dict) else None
            later += (made > visit.run.round) if isinstance(made, int) else (at > visit.run.started_at)
        return constraints[: len(constraints) - later] if later else constraints


_MISSING = object()


class _ReplayContext(StepContext):
    """A step context whose artifacts are hashed, never stored."""

    def __init__(self, *, execution, workflow, built: dict[str, str]) -> None:
        super().__init__(execution=execution, workflow=workflow)
        self._built = built

    def save_artifact(self, name: str, *, kind: str, title: str, content: str | bytes, content_type: str) -> None:
        data = content.encode() if isinstance(content, str) else content
        self._built[name] = hashlib.sha256(data).hexdigest()


class JournalModel:
    """The model of a replay: the journal. A call is rebuilt, hashed and compared with the
    recorded call of its key; its recorded answer is returned. Never a network call."""

    label = "journal (replay)"

    def __init__(self, execution: Execution, step: str, *, current: bool = False) -> None:
        self.execution = execution
        self.step = step
        self.current = current  # the execution's current step: the record may simply end
        self.seq = 0
        self.keys: list[str] = []
        self.asked: list[str] = []
        self.tokens = 0

    @property
    def name(self) -> str:
        """The model the step's calls were asked of (its context window decides when a round
        is compacted, as it did for the worker), "journal" when it made none."""
        model = (
            ModelCall.objects.filter(execution_id=self.execution.pk, step=self.step)
            .values_list("model", flat=True)
            .first()
        )
        return model or "journal"

    def ask(self, request: ModelRequest, **_ignored):
        self.seq += 1
        key = runtime.call_key(self.execution, self.step, self.seq)
        self.keys.append(key)
        recorded = ModelCall.objects.filter(key=key).order_by("-revision").first()
        if recorded is None:
            if self.current:
                raise runtime.ReplayEnded()  # not asked yet: the execution stands before this call
            raise Found("model_call", self.step, key, f"the code now makes call {key}, which was never made")
        rebuilt = request.canonical(model=recorded.model)
        sha = hashlib.sha256(canonical_json(rebuilt)).hexdigest()
        if sha != recorded.request_sha256:
            raise Found("model_call", self.step, key, _request_diff(recorded.request or {}, rebuilt))
        self.tokens += recorded.input_tokens + recorded.output_tokens
        return runtime.response_of(recorded)

    def complete(self, *, prompt: str, prompt_version: str, prompt_id: str = ""):
        request = ModelRequest(
            prompt_id=prompt_id or self.step,
            prompt_version=prompt_version,
            system="",
            messages=({"role": "user", "content": prompt},),
        )
        return self.ask(request)

    def summary(self) -> list[dict[str, Any]]:
        return [{"key": key} for key in self.keys]


def _request_diff(recorded: dict, rebuilt: dict) -> str:
    """Which parts of the rebuilt request differ from the recorded one, readably."""
    parts = []
    for part in ("model", "prompt", "system", "tools", "params"):
        if recorded.get(part) != rebuilt.get(part):
            parts.append(f"{part} ({_short(recorded.get(part))} → {_short(rebuilt.get(part))})")
    was, now = recorded.get("messages", []), rebuilt.get("messages", [])
    if was != now:
        if len(was) != len(now):
            parts.append(f"messages ({len(was)} recorded, {len(now)} now)")
        for n, (a, b) in enumerate(zip(was, now, strict=False)):
            if a != b:
                parts.append(
                    f"message {n + 1} ({a.get('role', '?')}): {_first_difference(a.get('content', ''), b.get('content', ''))}"
                )
                break
    what = "; ".join(parts) or "the request (as redacted in the record)"
    return f"the rebuilt request differs from the recorded one in {what}"


def _first_difference(a: Any, b: Any) -> str:
    a, b = str(a), str(b)
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    line = a.count("\n", 0, at) + 1
    return f"from line {line}: recorded {_short(a[at : at + 60])}, now {_short(b[at : at + 60])}"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text[:80] + ("…" if len(text) > 80 else ""))
