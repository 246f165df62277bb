"""``Keel``: one workflow author's test run on keel's real processes (the package's
docstring shows it in use).

It starts the processes (``processes.Processes``), then drives executions from the
test's own process through the services every interface shares: a start is
``execution_start`` (the API's), a signal and a decision are the events of
``POST /api/executions/{id}/events`` handed to the handler their type registered
(``executions.engine.events``: the wait gate's ``signal_deliver``, the approval gate's
``approval_decide``), with their bodies validated by the API's own models. So a refusal
is the one the API would give (``Conflict`` for its 409, ``Forbidden`` for 403,
``InvalidInput`` or pydantic's ``ValidationError`` for 422), and nothing is written
that the API would not write. Reads are the API's too (``selectors.execution_payload``,
the ledger's rows by key).

Its database must commit (pytest-django's ``transactional_db``): the workers are other
processes and see only what is committed; inside a test's transaction the kit refuses
to start, saying so.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterable, Mapping
from importlib import import_module
from pathlib import Path
from typing import Any

import requests
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import connection, transaction

from accounts.roles import ensure_roles
from accounts.tokens import api_token_create
from executions import selectors, services
from executions.engine import events, gates
from executions.errors import Conflict
from executions.models import TERMINAL, Action, Execution, Status, execution_for, pk_from_ref

from .processes import Processes, environment, session
from .waiting import checked_timeout, poll

JSON = dict[str, Any]
REQUESTER = "kit-requester"  # starts executions and sends signals (the user who started it may)
APPROVER = "kit-approver"  # a manager: decides approvals (never the requester)
OPERATOR = "kit-operator"  # an operator: resumes, cancels, resolves
ROLES = ("managers", "operators", "auditors")


class Api:
    """The Task API over real HTTP as one user (``Keel(web=True)``): ``get`` and ``post``
    take a path under ``/api`` and return the ``requests`` response."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base = base_url.rstrip("/") + "/api"
        self.http = session(token)

    def get(self, path: str) -> requests.Response:
        return self.http.get(self.base + path, timeout=15)

    def post(self, path: str, body: JSON) -> requests.Response:
        return self.http.post(self.base + path, json=body, timeout=15)


class Keel:
    """keel's processes for one test, and what a test does with them. Use it as a context
    manager (or call ``close``): the processes are SIGKILLed at the end.

    ``modules``: the workflow modules under test (dotted paths, a string with commas or a
    list), imported here and by every process (``KEEL_WORKFLOW_MODULES``). ``web``: start
    the web server too (``api()``, ``web_url``). ``sandbox``: start keel's sandbox as the
    fake provider (``SANDBOX_URL``, ``provider_calls``). ``workers``: how many workers
    (beat runs inside the first). ``failpoints``: ``RUNTIME_FAILPOINTS`` for the processes
    (``"before_effect_call:pay=sleep:1"``). ``model``: ``offline`` (the default; each agent's
    ``offline_policy`` plays the model) or ``openai`` / ``anthropic``: the workers' model
    client speaks that provider's wire format to the sandbox, which plays the model (its
    support-desk policy). ``env``: more environment for every process.
    ``tmp``: where logs and the processes' var dir go (default: a new temporary directory).
    ``database_url``: the processes' database, if not the one this process uses.
    """

    def __init__(
        self,
        *,
        modules: str | Iterable[str] = "",
        web: bool = False,
        sandbox: bool = False,
        workers: int = 1,
        failpoints: str = "",
        model: str = "offline",
        env: Mapping[str, str] | None = None,
        tmp: str | Path | None = None,
        database_url: str | None = None,
    ) -> None:
        if not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an integer of at least 1, not {workers!r}")
        names = [m.strip() for m in (modules.split(",") if isinstance(modules, str) else modules) if m.strip()]
        refuse_inside_a_transaction("start keel's processes")
        for module in names:
            _import_workflows(module)
        self.tmp = Path(tmp) if tmp is not None else Path(tempfile.mkdtemp(prefix="keel-kit-"))
        self.tmp.mkdir(parents=True, exist_ok=True)
        extra = {**(env or {}), **({"RUNTIME_FAILPOINTS": failpoints} if failpoints else {})}
        self._decided: dict[tuple[str, str], JSON] = {}  # (execution, event_id) → the decision sent
        self.processes = Processes(
            self.tmp, environment(tmp=self.tmp, modules=",".join(names), db_url=database_url, extra=extra)
        )
        try:
            self.processes.start(web=web, sandbox=sandbox, workers=workers, model=model)
        except BaseException:
            self.processes.close()
            raise

    # --- the processes

    def __enter__(self) -> Keel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """SIGKILL every process (and what it started)."""
        self.processes.close()

    @property
    def env(self) -> dict[str, str]:
        """The processes' environment: for a command of your own (``python -m django keel …``)."""
        return dict(self.processes.env)

    @property
    def web_url(self) -> str | None:
        return self.processes.web_url

    @property
    def sandbox_url(self) -> str | None:
        return self.processes.sandbox_url

    def logs(self) -> str:
        """The end of every process's log: print it when a test fails."""
        return self.processes.logs()

    def crash_workers(self, *, failpoints: str = "") -> None:
        """SIGKILL every worker (beat runs inside the first) and start one new worker with
        beat, as a deploy or a crash followed by a restart would; ``failpoints`` (default:
        none) is its ``RUNTIME_FAILPOINTS``, so a pause the test set for the first run is not
        inherited. Returns once the new worker is ready."""
        for child in self.processes.children:
            if child.name.startswith("worker-"):
                child.kill()
        self.processes.env["RUNTIME_FAILPOINTS"] = failpoints
        self.processes.worker(f"r{len(self.processes.children)}", beat=True)

    def failpoint_reached(self, name: str) -> bool:
        """Whether a ``pause`` failpoint (``before_step:draft=pause``) was reached."""
        return (self.tmp / "failpoints" / name.replace(":", "__")).exists()

    # --- people

    @property
    def requester(self) -> AbstractBaseUser:
        """The user ``start`` starts as (``kit-requester``), who may signal what they started."""
        return self._user(REQUESTER)

    @property
    def approver(self) -> AbstractBaseUser:
        """A manager (``kit-approver``), who decides approvals; never the requester."""
        return self._user(APPROVER, group="managers")

    @property
    def operator(self) -> AbstractBaseUser:
        """An operator (``kit-operator``): resumes, cancels, resolves, raises budgets."""
        return self._user(OPERATOR, group="operators")

    def user(self, name: str, *, group: str | None = None) -> AbstractBaseUser:
        """The user ``name`` (made on first use), in ``group`` (``managers``, ``operators``,
        ``auditors``) when given: for a second approver, an outsider, a separation of duties."""
        if group is not None and group not in ROLES:
            raise ValueError(f"group must be one of {', '.join(ROLES)}, not {group!r}")
        return self._user(name, group=group)

    def _user(self, name: str, *, group: str | None = None) -> AbstractBaseUser:
        user = get_user_model().objects.filter(username=name).first()  # a flushed database drops them
        if user is None:
            # An address, as people have: a manager is told of an approval by e-mail, as in production.
            user = get_user_model().objects.create_user(username=name, email=f"{name}@example.com")
            if group:
                ensure_roles()  # a flushed database drops the groups too
                user.groups.add(Group.objects.get(name=group))
        return user

    def api(self, user: AbstractBaseUser | None = None) -> Api:
        """The Task API over HTTP as ``user`` (default: the requester), with a new token."""
        if self.web_url is None:
            raise RuntimeError("the web server was not started: Keel(..., web=True)")
        return Api(self.web_url, api_token_create(user=user or self.requester))

    # --- executions

    def start(
        self,
        workflow: str,
        input: JSON,
        *,
        by: AbstractBaseUser | None = None,
        idempotency_key: str | None = None,
        budget_usd: float | None = None,
    ) -> str:
        """Start ``workflow`` with ``input`` (and ``budget_usd``) as the API's start does; its
        id (``RUN_0001``). A bad input raises InvalidInput naming the field (the API's 422)."""
        refuse_inside_a_transaction("start an execution the workers can see")
        with transaction.atomic():
            execution, _ = services.execution_start(
                user=by or self.requester,
                workflow=workflow,
                input=input,
                idempotency_key=idempotency_key,
                budget_usd=budget_usd,
            )
        return execution.ref

    def execution(self, ref: str) -> JSON:
        """The execution as ``GET /api/executions/{id}`` shows it."""
        return selectors.execution_payload(execution_for(ref))

    def outputs(self, ref: str) -> JSON:
        """Each completed step's output, by step name (what ``ctx.state`` shows a step)."""
        return execution_for(ref).outputs()

    def wait(self, ref: str, *statuses: str, timeout: float = 30) -> JSON:
        """Until ``ref`` is in one of ``statuses``; the execution as the API shows it.
        WaitTimedOut after ``timeout`` seconds, naming the time actually waited and where the
        execution is; AssertionError at once if it ends in another status (it never will be)."""
        wanted = _statuses(statuses)
        checked_timeout(timeout)

        def look() -> JSON | None:
            status = _status(ref)  # one small read a look; the whole execution once it is there
            if status in wanted:
                shown = self.execution(ref)
                return shown if shown["status"] in wanted else None  # moved on between the reads
            if status in TERMINAL:
                raise AssertionError(
                    f"{ref} ended {_where(self.execution(ref))}: it will never be {' or '.join(wanted)}"
                )
            return None

        what = f"{ref} to be {' or '.join(wanted)}"
        return poll(look, timeout=timeout, what=what, last_seen=lambda: f"it is {_where(self.execution(ref))}")

    def signal(
        self,
        ref: str,
        name: str,
        payload: Any = None,
        *,
        by: AbstractBaseUser | None = None,
        event_id: str | None = None,
    ) -> JSON:
        """Deliver the signal ``name`` (with ``payload``) as ``POST …/events`` ``type:
        "signal"`` does, as ``by`` (default: the requester); its 202 body. Conflict when the
        execution is not waiting for ``name`` (signals are never kept for later)."""
        body = {"type": "signal", "name": name, "payload": payload, "event_id": event_id or uuid.uuid4().hex}
        return self._deliver(ref, by or self.requester, body)

    def answer(self, ref: str, answer: Any, *, by: AbstractBaseUser | None = None, event_id: str | None = None) -> JSON:
        """Answer the question ``ref`` waits at (``pending_input``: a tool's provider asked it
        mid-call) as ``POST …/events`` ``type: "input.answer"`` does, as ``by`` (default: the
        requester); its 202 body. InvalidInput when the schema refuses ``answer``."""
        pending = self.execution(ref)["pending_input"]
        if pending is None:
            raise AssertionError(f"{ref} asks for no input: it is {_where(self.execution(ref))}")
        body = {
            "type": "input.answer",
            "input_id": pending["id"],
            "answer": answer,
            "event_id": event_id or uuid.uuid4().hex,
        }
        return self._deliver(ref, by or self.requester, body)

    def decide(
        self,
        ref: str,
        decision: str = "approve",
        *,
        comment: str = "",
        by: AbstractBaseUser | None = None,
        artifact_version: int | None = None,
        content_sha256: str | None = None,
        event_id: str | None = None,
    ) -> JSON:
        """Decide the approval ``ref`` awaits (approve, reject or request_changes, the last
        with a ``comment``) as ``POST …/events`` ``type: "approval.decision"`` does, as ``by``
        (default: the approver), on the exact version and sha256 it shows unless told others;
        its 202 body. Conflict for a stale version or hash or when it awaits no approval,
        Forbidden without authority. The
        same ``event_id`` again sends the same decision again (the API's retry: its 202 body
        again, nothing changed), also once the approval is no longer pending."""
        if event_id is not None and (ref, event_id) in self._decided:  # a retry: the same body again
            return self._deliver(ref, by or self.approver, self._decided[(ref, event_id)])
        pending = self.execution(ref)["pending_approval"]
        if pending is None:  # as the API refuses a decision on a request no longer pending: 409
            raise Conflict(f"{ref} awaits no approval: it is {_where(self.execution(ref))}")
        body = {
            "type": "approval.decision",
            "approval_id": pending["id"],
            "decision": decision,
            "artifact_version": pending["artifact_version"] if artifact_version is None else artifact_version,
            "content_sha256": pending["content_sha256"] if content_sha256 is None else content_sha256,
            "comment": comment,
            "event_id": event_id or uuid.uuid4().hex,
        }
        self._decided[(ref, body["event_id"])] = body
        return self._deliver(ref, by or self.approver, body)

    def _deliver(self, ref: str, user: AbstractBaseUser, body: JSON) -> JSON:
        """``body`` to the handler its type registered, validated by the API's model for it."""
        refuse_inside_a_transaction("deliver an event the workers can see")
        event = events.get(body["type"])
        return dict(event.handle(ref=ref, user=user, body=event.body.model_validate(body)))

    # --- the ledger and the provider

    def effect(self, key: str) -> JSON:
        """The ledger's action under ``key``: its execution, step, type, status, attempts,
        arguments, receipt and last error. LookupError naming the keys there are if none."""
        action = Action.objects.filter(key=key).select_related("execution").first()
        if action is None:
            known = list(Action.objects.order_by("id").values_list("key", flat=True)[:20])
            raise LookupError(f"no action under the key {key!r} in the ledger (its keys: {known or 'none'})")
        return {
            "key": action.key,
            "execution": action.execution.ref,
            "step": action.step,
            "type": action.type,
            "status": action.status,
            "attempts": action.attempts,
            "args": action.args,
            "receipt": action.receipt,
            "last_error": action.last_error,
        }

    def provider_calls(self, key: str) -> dict[str, int]:
        """What the sandbox (``Keel(sandbox=True)``) saw under this key: ``{"calls": n,
        "effects": n}``, an effect being a change it committed."""
        if self.sandbox_url is None:
            raise RuntimeError("the sandbox was not started: Keel(..., sandbox=True)")
        stats = session().get(f"{self.sandbox_url}/_stats", timeout=30).json()
        return stats["keys"].get(key, {"calls": 0, "effects": 0})

    # --- the whole way

    def run(
        self,
        workflow: str,
        input: JSON,
        *,
        decide: str = "approve",
        comment: str = "",
        signals: Mapping[str, Any] | None = None,
        timeout: float = 60,
    ) -> JSON:
        """Start ``workflow`` and take it to its end: each approval it awaits decided
        (``decide``, as the approver), each signal of ``signals`` ({name: payload}) delivered
        once when it waits for that name. Returns the execution as the API shows it once it
        is completed, failed, cancelled or needs attention; WaitTimedOut after ``timeout``
        seconds, naming the time actually waited and where it stopped."""
        checked_timeout(timeout)
        ref = self.start(workflow, input)
        left = dict(signals or {})
        decided: set[int] = set()

        def look() -> JSON | None:
            status = _status(ref)
            if status in TERMINAL or status == Status.NEEDS_ATTENTION:
                return self.execution(ref)
            if status not in (Status.AWAITING_APPROVAL, Status.WAITING):
                return None
            pending = gates.pending_of(execution_for(ref))
            if pending is not None and pending.kind == "approval" and pending.details["id"] not in decided:
                decided.add(pending.details["id"])
                self.decide(ref, decide, comment=comment)
            elif pending is not None and pending.kind == "wait" and pending.details.get("signal") in left:
                name = pending.details["signal"]
                self.signal(ref, name, left.pop(name))
            return None

        what = f"{ref} ({workflow}) to end"
        return poll(look, timeout=timeout, what=what, last_seen=lambda: f"it is {_where(self.execution(ref))}")


def refuse_inside_a_transaction(act: str) -> None:
    """RuntimeError inside a transaction: the workers would never see what it writes."""
    if connection.in_atomic_block:
        raise RuntimeError(
            f"the kit can't {act} inside a transaction (the workers see only what is committed): "
            "use pytest-django's transactional_db, or @pytest.mark.django_db(transaction=True)"
        )


def _import_workflows(module: str) -> None:
    """Import ``module`` here, so this process knows its workflows as the workers do."""
    try:
        import_module(module)
    except Exception as exc:  # the author's code: named in one sentence, as the processes would
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ImportError(
            f"Keel(modules=…) names {module}, which does not import: {type(exc).__name__}" + (f": {why}" if why else "")
        ) from exc


def _statuses(statuses: tuple[str, ...]) -> list[str]:
    if not statuses:
        raise ValueError("name the status to wait for: wait(ref, 'completed')")
    unknown = [s for s in statuses if s not in Status.values]
    if unknown:
        raise ValueError(f"no status {', '.join(map(repr, unknown))}: one of {', '.join(Status.values)}")
    return list(statuses)


def _status(ref: str) -> str:
    """The status of ``ref``, in one small read; NotFound (or Gone) if there is none."""
    pk = pk_from_ref(ref)
    status = Execution.objects.filter(pk=pk).values_list("status", flat=True).first() if pk else None
    if status is None:
        return execution_for(ref).status  # raises, saying why
    return status


def _where(shown: JSON) -> str:
    """Where an execution is: "waiting at shipment (the signal shipment_confirmed)"."""
    if not shown:
        return "not read yet"
    where = f"{shown['status']} at {shown['current_step']}" if shown.get("current_step") else shown["status"]
    gate = shown.get("pending_gate")
    if gate:
        where += f" ({gate['waiting_for']})"
    if shown.get("stuck"):
        where += f"; stuck: {shown['stuck']['reason']}, {shown['stuck']['detail']}"
    return where
