"""The approval gate: a person decides one action on one exact artifact version.

A workflow declares it with ``flow.gate(name, label=…, spec=Approval(artifact=…,
action=…, approver=ApproverPolicy(…)))`` and guards its effects with
``guarded_by=name``. The runtime (``executions.engine.gates``) calls it; everything about
requests, decisions, audit entries and expiry lives in this app.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import ClassVar

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import DateTimeField, Exists, ExpressionWrapper, OuterRef, Q, Value
from django.db.models.functions import Now

from artifacts.models import ArtifactVersion
from executions import runtime
from executions.authoring.specs import GateSpec
from executions.authoring.workflow import Effect, Step, Workflow
from executions.errors import FailureKind, StepFailure
from executions.models import Action, Execution
from executions.reasons import StuckReason
from executions.runtime import CompiledRead, in_seconds

from . import audit, policy, services, throttle
from .models import ApprovalRequest, AuditEntry, gate_ref_for

LAPSED = (ApprovalRequest.State.EXPIRED, ApprovalRequest.State.WITHDRAWN, ApprovalRequest.State.SUPERSEDED)


@dataclass(frozen=True, kw_only=True)
class ApproverPolicy:
    """Who may decide an approval gate's request, and what happens when nobody does.

    ``permission``: the Django permission an approver needs (one per action type).
    ``group``: optionally, a group the approver must belong to. ``separation_of_duties``:
    the user who started the execution may not approve it. ``expires_after_seconds``:
    None for never; on expiry the execution goes to ``needs_attention`` or is
    cancelled (``on_expiry``).
    """

    permission: str = "approvals.decide_approval"
    group: str = ""
    separation_of_duties: bool = True
    expires_after_seconds: float | None = None
    on_expiry: str = "needs_attention"

    def __post_init__(self) -> None:
        if self.on_expiry not in ("needs_attention", "cancel"):
            raise ValueError("on_expiry must be needs_attention or cancel")


@dataclass(frozen=True, kw_only=True)
class Approval(GateSpec):
    """An approval gate's spec: the artifact (by name) the decision binds to, the action
    it unlocks, and who may decide."""

    kind: ClassVar[str] = "approval"
    artifact: str
    action: str
    approver: ApproverPolicy = field(default_factory=ApproverPolicy)
    # How long a decision may take before the triage console calls it overdue
    # (approval_overdue); None: settings.APPROVAL_SLA_SECONDS.
    sla_seconds: float | None = None
    # Where "request changes" (or a redraft) sends the execution back to, in a new round
    # with the comment as a mandatory constraint: "" for the step that produced the version.
    redraft_from: str = ""
    # The step a reject continues at (its ``ctx.state[gate]``: the decision, the comment and
    # who decided); None: a reject ends the execution (cancelled).
    on_reject: str | None = None


# A visit's read (the step's request this round, with its decision and who decided), compiled
# once: on the path from a decision to the next step (executions.engine.compiled).
_OUTCOME = CompiledRead(
    lambda execution_id, step, round: ApprovalRequest.objects.filter(
        execution_id=execution_id, step=step, round=round
    ).values_list(
        "pk",
        "status",
        "version",
        "content_sha256",
        "action",
        "decision__decision",
        "decision__decided_by_username",
        f"decision__decided_by__{get_user_model().USERNAME_FIELD}",
        "decision__comment",
    ),
    args=(int, str, int),
)


class ApprovalGate(runtime.Gate):
    kind = Approval.kind

    def visit(self, execution: Execution, step: Step):
        found = _OUTCOME.get(execution.pk, step.name, execution.round)
        if found is None:
            return None
        pk, status, version, sha256, action, decision, decided_by_then, decided_by_now, comment = found
        if status in LAPSED:  # resumed after the request lapsed: ask again
            return runtime.Reopen()
        spec = step.spec
        assert isinstance(spec, Approval), "the approval gate runs only approval steps"
        if status == ApprovalRequest.State.REJECTED and spec.on_reject:
            return runtime.Passed(
                {
                    "approval_id": pk,
                    "decision": "reject",
                    "comment": comment or "",
                    "decided_by": decided_by_then or decided_by_now,
                    "artifact_version": version,
                    "content_sha256": sha256,
                }
            )
        if status != ApprovalRequest.State.APPROVED:
            # e.g. resumed by an operator while nothing approves it: a person decides.
            return runtime.Attention(
                f"approval request {pk} is {status}; no approval to act on", code=StuckReason.APPROVAL_LAPSED
            )
        return runtime.Passed(
            {
                "approval_id": pk,
                "decision": decision,
                "decided_by": decided_by_then or decided_by_now,  # Decision.approver
                "artifact_version": version,
                "content_sha256": sha256,
                "action": action,
            }
        )

    def visit_subject(self, execution: Execution, step: Step, subject_sha256: str):
        """The decision on exactly this tool call (its document's sha256): an approval of it
        in any round passes (and keys its one effect); this round's request about another
        call, or lapsed, asks again in a new round; nothing asked this round opens one."""
        username = f"decision__decided_by__{get_user_model().USERNAME_FIELD}"
        requests = ApprovalRequest.objects.filter(execution_id=execution.pk, step=step.name).order_by("-round")
        rows = requests.values_list(
            "pk",
            "round",
            "status",
            "version",
            "content_sha256",
            "action",
            "decision__decision",
            "decision__decided_by_username",
            username,
        )
        current = None
        for pk, round, status, version, sha256, action, decision, decided_by_then, decided_by_now in rows:
            if status == ApprovalRequest.State.APPROVED and sha256 == subject_sha256:
                return runtime.Passed(
                    {
                        "approval_id": pk,
                        "decision": decision,
                        "decided_by": decided_by_then or decided_by_now,
                        "artifact_version": version,
                        "content_sha256": sha256,
                        "action": action,
                    }
                )
            if round == execution.round:
                current = (pk, status, sha256)
        if current is None:
            return None
        pk, status, sha256 = current
        if status in LAPSED or sha256 != subject_sha256:
            return runtime.Reopen()
        return runtime.Attention(
            f"approval request {pk} is {status}; no approval to act on", code=StuckReason.APPROVAL_LAPSED
        )

    def open(self, execution: Execution, step: Step, workflow: Workflow, *, actor_label: str) -> runtime.Opened:
        spec = step.spec
        assert isinstance(spec, Approval), "the approval gate runs only approval steps"
        approver = spec.approver
        saved = execution.context.get("artifacts", {})
        if spec.artifact not in saved:  # the workflow's mistake: said plainly, for whoever fixes it
            raise LookupError(
                f"{step.name} asks to approve the artifact {spec.artifact!r}, but no step before it saved one "
                f"by that name (ctx.save_artifact; saved: {sorted(saved) or 'none'})"
            )
        ref = saved[spec.artifact]
        version = ArtifactVersion.objects.get(pk=ref["version_pk"])
        expires = approver.expires_after_seconds
        request = ApprovalRequest.objects.create(
            execution=execution,
            step=step.name,
            round=execution.round,
            artifact_version=version,
            version=version.number,
            content_sha256=version.sha256,
            action=spec.action,
            requested_by=execution.created_by,
            permission=approver.permission,
            group=approver.group,
            separation_of_duties=approver.separation_of_duties,
            on_expiry=approver.on_expiry,
            expires_at=ExpressionWrapper(Now() + Value(timedelta(seconds=expires)), output_field=DateTimeField())
            if expires
            else None,
        )
        audit.record(
            AuditEntry.Kind.REQUESTED,
            request=request,
            actor_label=actor_label,
            artifact_version=version.number,
            content_sha256=version.sha256,
            requested_by=execution.created_by.get_username(),
            permission=approver.permission,
            group=approver.group,
        )
        return runtime.Opened(
            sla_at=in_seconds(spec.sla_seconds or settings.APPROVAL_SLA_SECONDS),
            transition="await_approval",
            ref=request.gate_ref,
            event="approval.requested",
            payload={
                "approval_id": request.pk,
                "artifact_id": ref["artifact_id"],
                "artifact_version": version.number,
                "content_sha256": version.sha256,
                "action": spec.action,
            },
        )

    def withdraw(self, execution: Execution, *, actor, actor_label: str, reason: str) -> dict:
        withdrawn = []
        for request in ApprovalRequest.objects.select_for_update().filter(
            execution=execution, status=ApprovalRequest.State.PENDING
        ):
            services.close_request(
                request, "withdraw", AuditEntry.Kind.WITHDRAWN, actor=actor, actor_label=actor_label, reason=reason
            )
            withdrawn.append(request.pk)
        return {"withdrawn_approvals": withdrawn}

    def on_new_version(self, version: ArtifactVersion, *, actor_label: str) -> None:
        services.supersede_older(version, actor_label=actor_label)

    def sweep(self) -> list[int]:
        throttle.flush_closed()
        return services.expire_due()

    def pending(self, execution: Execution) -> runtime.PendingGate | None:
        request = (
            ApprovalRequest.objects.filter(execution=execution, status=ApprovalRequest.State.PENDING)
            .select_related("artifact_version__artifact")
            .order_by("-id")
            .first()
        )
        return _pending(request) if request is not None else None

    def pending_many(self, executions: list[Execution]) -> dict[int, runtime.PendingGate]:
        found: dict[int, runtime.PendingGate] = {}
        requests = (
            ApprovalRequest.objects.filter(execution__in=executions, status=ApprovalRequest.State.PENDING)
            .select_related("artifact_version__artifact")
            .order_by("-id")
        )
        for request in requests:
            found.setdefault(request.execution_id, _pending(request))
        return found

    def holding(self) -> Q:
        return Q(Exists(ApprovalRequest.objects.filter(execution=OuterRef("pk"), status=ApprovalRequest.State.PENDING)))

    def check_effect(self, execution: Execution, workflow: Workflow, gate_step: Step, effect: Effect) -> None:
        """The version about to be used is the one approved (version and sha256), and the
        approver still holds the authority (skipped once the effect is recorded as done,
        when nothing will be sent; both skipped once an operator resolved it as failed,
        when the ledger refuses it). Refused: PERMISSION, so needs_attention."""
        spec = gate_step.spec
        assert isinstance(spec, Approval), "the approval gate guards effects from approval steps"
        approval = execution.outputs().get(gate_step.name)
        ref = execution.context.get("artifacts", {}).get(spec.artifact)
        if not approval or approval.get("decision") != "approve" or ref is None:
            raise _refused(f"an approval from {gate_step.name} is needed first")
        recorded = Action.objects.filter(key=effect.key).first()
        if recorded is not None and runtime.resolved_failed(recorded):
            return  # an operator established it did not happen: the ledger sends nothing (its on_failure)
        # The newest version of the artifact, whoever made it: an edit after the
        # approval must not ride on it.
        version = ArtifactVersion.objects.filter(artifact_id=ref["artifact_pk"]).order_by("-number").first()
        if (version.number, version.sha256) != (approval["artifact_version"], approval["content_sha256"]):
            raise _refused(
                f"approved V{approval['artifact_version']} ({approval['content_sha256'][:12]}) "
                f"but the current artifact is V{version.number} ({version.sha256[:12]})",
                current_version=version.number,
                current_sha256=version.sha256,
            )
        if recorded is not None and recorded.status == Action.State.SUCCEEDED:
            return
        request = ApprovalRequest.objects.select_related("decision__decided_by").get(pk=approval["approval_id"])
        approver = request.decision.decided_by
        refused = policy.refusal(approver, request)
        if refused:
            raise _refused(
                f"the approver lost the authority: the approval of V{request.version} by "
                f"{approver.get_username()} no longer holds ({refused})",
                approver=approver.get_username(),
            )

    def grant_ref(self, execution: Execution, gate_step: Step) -> str:
        approval = execution.outputs().get(gate_step.name) or {}
        return gate_ref_for(approval["approval_id"]) if approval.get("approval_id") else ""

    def stale(self, execution: Execution) -> list[runtime.StaleGrant]:
        """Approved requests whose effects are not all done and that ``check_effect``
        would now refuse: the artifact has a newer version (or other bytes) than the one
        approved, or the approver no longer holds the authority."""
        found = []
        requests = ApprovalRequest.objects.filter(
            Q(execution=execution) | Q(pk__in=reused_approvals(execution)), status=ApprovalRequest.State.APPROVED
        ).select_related("decision__decided_by", "artifact_version")
        for request in requests:
            guarded = Action.objects.filter(gate_ref=request.gate_ref, execution=execution)
            if guarded and all(_settled(action) for action in guarded):
                continue  # what it authorised is done: nothing will rely on it again
            whys = []
            newest = (
                ArtifactVersion.objects.filter(artifact_id=request.artifact_version.artifact_id)
                .order_by("-number")
                .first()
            )
            if (newest.number, newest.sha256) != (request.version, request.content_sha256):
                whys.append(
                    f"approved V{request.version} ({request.content_sha256[:12]}) but the newest version is "
                    f"V{newest.number} ({newest.sha256[:12]})"
                )
            approver = request.decision.decided_by
            refused = policy.refusal(approver, request)
            if refused:
                whys.append(f"the approver {approver.get_username()} lost the authority ({refused})")
            if whys:
                found.append(
                    runtime.StaleGrant(
                        step=request.step,
                        why="; ".join(whys),
                        details={
                            "approval_id": request.pk,
                            "artifact_version": request.version,
                            "content_sha256": request.content_sha256,
                        },
                    )
                )
        return found


def _settled(action: Action) -> bool:
    """Nothing will be sent for ``action`` again: it succeeded, or an operator resolved
    it as failed (the ledger refuses it under its key; its step goes on at on_failure)."""
    return action.status == Action.State.SUCCEEDED or runtime.resolved_failed(action)


def reused_approvals(execution: Execution) -> list[int]:
    """The approval requests ``execution``'s recorded gate outcomes name that belong to
    another execution: the decisions a restart reused (triage.restart)."""
    ids = []
    for output in execution.outputs().values():
        if isinstance(output, dict) and isinstance(output.get("approval_id"), int):
            ids.append(output["approval_id"])
    if not ids:
        return []
    return list(ApprovalRequest.objects.filter(pk__in=ids).exclude(execution=execution).values_list("pk", flat=True))


def _refused(message: str, **evidence) -> StepFailure:
    """The effect step's refusal, marked as the approval check's (the failed step run's
    evidence; the metrics count these as ``approval_integrity.refused``)."""
    return StepFailure(FailureKind.PERMISSION, message, evidence={"approval_check": "refused", **evidence})


def _pending(request: ApprovalRequest) -> runtime.PendingGate:
    artifact = request.artifact_version.artifact.ref
    return runtime.PendingGate(
        kind=Approval.kind,
        step=request.step,
        ref=request.gate_ref,
        waiting_for=f"a decision to {request.action.replace('_', ' ')} {artifact} V{request.version}",
        since=request.created_at,
        until=request.expires_at,
        details={
            "id": request.pk,
            "artifact_id": artifact,
            "artifact_version": request.version,
            "content_sha256": request.content_sha256,
            "action": request.action,
            "expires_at": request.expires_at,
        },
    )


runtime.register_gate(ApprovalGate())
