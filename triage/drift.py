"""Model drift (docs/design.md §4, the model-call journal): a recorded model call no longer
matches the request rebuilt when its step runs again (a prompt, a tool or a parameter
changed), and the execution stopped for a person (needs_attention ``model_drift``).

What a person can do, besides cancelling: compare the two requests (``drift_of``: the
recorded one from the journal, the rebuilt one from the stopped attempt's evidence)
and either restore what changed and resume, or **accept the new request**
(``execution_accept_request``): an audited ``operator.accept_request`` event naming
the call and both hashes, and the resume, in one transaction. The journal then asks
the model again for that call and the calls after it in its step — the calls before
it still replay, and an effect those calls lead to again is still the same ledger
action, never sent twice — recording each answer as its key's next revision; the old
records stay, superseded. An accepted request is exactly the one shown: if the step
rebuilds yet another one for that call, it stops again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from executions import runtime
from executions.errors import Conflict, Forbidden, InvalidInput
from executions.models import Execution, ModelCall, Status, StepRun
from executions.services import OPERATE, execution_for


@dataclass(frozen=True)
class Drift:
    """The drift that stopped an execution: the call, the request recorded for it, and the
    request its step rebuilt (``rebuilt_request`` None for a drift recorded before the
    rebuilt request was kept as evidence)."""

    key: str
    step: str
    round: int
    seq: int
    recorded_sha256: str
    rebuilt_sha256: str
    recorded_request: dict[str, Any]
    rebuilt_request: dict[str, Any] | None
    accepted: bool


def drift_of(execution: Execution) -> Drift | None:
    """The drift ``execution`` stopped at, if it is stopped by one (read only)."""
    if execution.status != Status.NEEDS_ATTENTION or execution.reason_code != runtime.ModelDrift.code:
        return None
    run = (
        StepRun.objects.filter(
            execution=execution, step=execution.current_step, round=execution.round, outcome=StepRun.Outcome.FAILED
        )
        .order_by("-id")
        .first()
    )
    evidence = (run.output or {}).get("evidence") if run is not None else None
    if not isinstance(evidence, dict) or not {"key", "recorded_sha256", "rebuilt_sha256"} <= set(evidence):
        return None
    recorded = ModelCall.objects.filter(key=evidence["key"]).order_by("-revision").first()
    if recorded is None:
        return None
    return Drift(
        key=evidence["key"],
        step=run.step,
        round=recorded.round,
        seq=recorded.seq,
        recorded_sha256=evidence["recorded_sha256"],
        rebuilt_sha256=evidence["rebuilt_sha256"],
        recorded_request=recorded.request,
        rebuilt_request=evidence.get("rebuilt_request"),
        accepted=runtime.accepted(
            execution.pk, evidence["key"], evidence["recorded_sha256"], evidence["rebuilt_sha256"]
        ),
    )


def execution_accept_request(
    *, ref: str, user: AbstractBaseUser, key: str, request_sha256: str, reason: str
) -> Execution:
    """Operators: accept the request rebuilt for call ``key`` (its sha256, as shown) and
    resume: the call is asked again with it. Raises Forbidden, NotFound, InvalidInput
    naming ``reason``, Conflict (not stopped by a drift; another call or another request
    than the one that stopped it; a resume blocker such as an unknown outcome)."""
    if not user.has_perm(OPERATE):
        raise Forbidden("only operators may accept a new model request")
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("reason", "say why the new request is right (a changed prompt, a new tool…)")
    with transaction.atomic():
        execution = Execution.objects.select_for_update(no_key=True).get(pk=execution_for(ref).pk)
        runtime.require(user, "operate", execution.workflow)
        drift = drift_of(execution)
        if drift is None:
            raise Conflict(
                f"{execution.ref} is {execution.status}, not stopped by a model drift", status=execution.status
            )
        if (key, request_sha256) != (drift.key, drift.rebuilt_sha256):
            raise Conflict(
                f"{execution.ref} stopped at {drift.key}, rebuilt as {drift.rebuilt_sha256[:12]}: accept that "
                f"request, not {key} {request_sha256[:12]}",
                key=drift.key,
                request_sha256=drift.rebuilt_sha256,
            )
        runtime.record(
            execution,
            runtime.ACCEPTED,
            step=drift.step,
            actor=user,
            payload={
                "key": drift.key,
                "step": drift.step,
                "round": drift.round,
                "seq": drift.seq,
                "recorded_sha256": drift.recorded_sha256,
                "rebuilt_sha256": drift.rebuilt_sha256,
                "reason": reason,
            },
        )
        # The one resume (it refuses, writing nothing, while a blocker such as an unknown outcome stands).
        runtime.resume_locked(
            execution,
            actor=user,
            reason=f"accepted the new request for {drift.key}: {reason}",
            follows="accept_request",
        )
    return execution
