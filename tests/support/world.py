"""Every shipped workflow driven into every state it can reach, with real processes.

``build_world`` starts executions of ``monthly_report`` and ``replacement_order`` as a
requester, lets real workers take them to their approval gate, then decides,
cancels, redrafts and injects the sandbox's faults one state at a time (faults apply
to the next calls of an endpoint, so each is armed just before the one execution
that must meet it). It returns ``{state name: execution ref}``.

Used by the page crawl and the accessibility checks, which only read what it built.
"""

from __future__ import annotations

import datetime as dt
import inspect
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import Group
from django.utils import timezone

from accounts.roles import ensure_roles
from approvals.models import ApprovalRequest
from approvals.services import approval_decide, execution_redraft
from executions.models import Execution, Status
from executions.services import action_resolve, execution_cancel, execution_start
from executions.waits import signal_deliver
from tests.support.procs import http, wait_for
from tests.support.stack import Stack, pk

# S31's hostile constraint: a script link, a remote image and raw HTML.
HOSTILE_CONSTRAINT = (
    "Cite the source [Verify](javascript:alert(document.cookie)) "
    "![chart](https://evil.example/x.png) <script>alert(1)</script>"
)

ROLES = {
    "requester": None,
    "manager": "managers",
    "operator": "operators",
    "auditor": "auditors",
    "outsider": None,
}

SETTLED = {Status.COMPLETED, Status.FAILED, Status.CANCELLED, Status.NEEDS_ATTENTION}


@dataclass
class Account:
    user: Any
    password: str


def make_people() -> dict[str, Account]:
    ensure_roles()
    User = get_user_model()
    people = {}
    for name, group in ROLES.items():
        password = f"pw-{name}-{uuid.uuid4().hex[:8]}"
        user = User.objects.create_user(username=name, email=f"{name}@example.com")
        # Hashed for config.settings (a web process the tests start), not for the test settings' MD5.
        hasher = PBKDF2PasswordHasher()
        user.password = hasher.encode(password, hasher.salt(), iterations=1000)
        user.save(update_fields=["password"])
        if group:
            user.groups.add(Group.objects.get(name=group))
        people[name] = Account(user=user, password=password)
    return people


class Driver:
    """Moves executions from state to state through the services and the sandbox's faults."""

    def __init__(self, stack: Stack, people: dict[str, Account]) -> None:
        self.stack, self.people = stack, people

    def start(self, workflow: str, **data: Any) -> str:
        execution, _ = execution_start(user=self.people["requester"].user, workflow=workflow, input=data)
        return execution.ref

    def status(self, ref: str) -> str:
        return Execution.objects.values_list("status", flat=True).get(pk=pk(ref))

    def wait(self, ref: str, *statuses: str, timeout: float = 90) -> str:
        return wait_for(
            lambda: (s := self.status(ref)) in statuses and s, timeout=timeout, what=f"{ref} to be {statuses}"
        )

    def pending(self, ref: str, version: int = 1) -> ApprovalRequest:
        def find():
            request = ApprovalRequest.objects.filter(execution_id=pk(ref), status="pending").order_by("-id").first()
            ready = request is not None and request.version == version and self.status(ref) == "awaiting_approval"
            return request if ready else None

        return wait_for(find, timeout=90, what=f"{ref} to await approval of V{version}")

    def decide(self, ref: str, decision: str = "approve", comment: str = "") -> None:
        request = self.pending(ref, ApprovalRequest.objects.filter(execution_id=pk(ref)).order_by("-id")[0].version)
        approval_decide(
            user=self.people["manager"].user,
            execution_ref=ref,
            approval_id=request.pk,
            decision=decision,
            artifact_version=request.version,
            content_sha256=request.content_sha256,
            event_id=uuid.uuid4().hex,
            comment=comment,
        )

    def ship(self, ref: str) -> None:
        """The warehouse confirms the shipment replacement_order v2 waits for."""
        self.wait(ref, Status.WAITING)
        signal_deliver(
            ref=ref,
            user=self.people["requester"].user,
            name="shipment_confirmed",
            payload={"tracking": "TRK-4711"},
            event_id=uuid.uuid4().hex,
        )

    def fault(self, endpoint: str, fault: str, **spec: Any) -> None:
        answer = http().post(
            f"{self.stack.sandbox_url}/_faults", json={"endpoint": endpoint, "fault": fault, **spec}, timeout=5
        )
        assert answer.status_code == 201, answer.text

    def clear_faults(self) -> None:
        assert http().delete(f"{self.stack.sandbox_url}/_faults", timeout=5).status_code == 200

    def unknown_then(self, refs: dict[tuple[str, str], list[str]]) -> None:
        """The effect commits at the provider but the answer is lost, and lookups fail: unknown.
        ``refs`` by (submit endpoint, lookup endpoint); endpoints of their own, so at once."""
        for (submit, lookup), those in refs.items():
            self.fault(submit, "commit_then_hang", count=len(those), hang_seconds=5)
            self.fault(lookup, "error_500", method="GET", count=10_000)
        every = [ref for those in refs.values() for ref in those]
        for ref in every:
            self.decide(ref)
        for ref in every:
            self.wait(ref, Status.NEEDS_ATTENTION, timeout=150)
        self.clear_faults()

    def resolve(self, key: str, evidence: str, **receipt: str) -> None:
        """An operator resolves an unknown outcome as succeeded, with the receipt fields the step reads.

        (Branches without issue 13's resolve procedure take no receipt: it is left out there.)
        """
        extra = {"receipt": receipt} if "receipt" in inspect.signature(action_resolve).parameters else {}
        action_resolve(key=key, user=self.people["operator"].user, outcome="succeeded", evidence=evidence, **extra)

    def order_id(self, reference: str) -> str:
        """What an operator finds at the order service for a client reference."""
        answer = http().get(f"{self.stack.sandbox_url}/orders", params={"reference": reference}, timeout=5)
        [order] = answer.json()["orders"]
        return order["order_id"]


def build_world(stack: Stack, people: dict[str, Account]) -> dict[str, str]:
    """Drive both workflows into every reachable state; ``{state: ref}``."""
    with stack.together():
        workers = [stack.worker("w1"), stack.worker("w2")]
        stack.beat()
    d = Driver(stack, people)
    report = {"month": "2026-08"}
    refs = {
        "report_awaiting_approval": d.start("monthly_report", month="2026-08", constraints=[HOSTILE_CONSTRAINT]),
        **{
            f"report_{state}": d.start("monthly_report", **report)
            for state in (
                "completed",
                "retrying",
                "permission_denied",
                "failed",
                "unknown_outcome",
                "resolved",
                "cancelled",
                "rejected",
                "superseded_by_redraft",
                "changes_requested",
                "approval_expired",
            )
        },
        **{
            f"order_{state}": d.start("replacement_order", original_order="ORD-1001")
            for state in (
                "awaiting_approval",
                "completed",
                "unknown_outcome",
                "resolved",
                "submitted_then_retrying",
                "rejected",
                "approval_expired",
                "waiting",
            )
        },
        "order_waiting_overdue": d.start("replacement_order", original_order="ORD-1002", confirm_within_seconds=1),
    }
    for ref in refs.values():
        d.pending(ref)

    d.decide(refs["report_completed"])
    d.decide(refs["order_completed"])
    d.decide(refs["order_waiting"])
    d.decide(refs["order_waiting_overdue"])
    d.ship(refs["order_completed"])
    d.wait(refs["report_completed"], Status.COMPLETED)
    d.wait(refs["order_completed"], Status.COMPLETED)
    d.wait(refs["order_waiting"], Status.WAITING)
    d.wait(refs["order_waiting_overdue"], Status.NEEDS_ATTENTION)

    d.fault("/reports/publish", "rate_limit", retry_after=900)  # retry due in 15 minutes
    d.decide(refs["report_retrying"])
    d.wait(refs["report_retrying"], Status.RETRY_PENDING)

    d.fault("/reports/publish", "error_403")
    d.decide(refs["report_permission_denied"])
    d.wait(refs["report_permission_denied"], Status.NEEDS_ATTENTION)

    d.fault("/reports/publish", "error_400")
    d.decide(refs["report_failed"])
    d.wait(refs["report_failed"], Status.FAILED)

    d.unknown_then(
        {
            ("/reports/publish", "/reports/publications"): [refs["report_unknown_outcome"], refs["report_resolved"]],
            ("/orders", "/orders"): [refs["order_unknown_outcome"], refs["order_resolved"]],
        }
    )
    d.resolve(f"{refs['report_resolved']}:publish:v1", "PUB found on the report portal by the operator")
    d.wait(refs["report_resolved"], *SETTLED)

    submitted = f"{refs['order_resolved']}:submit_order:v1"
    order_id = d.order_id(submitted)
    d.resolve(submitted, f"the order service shows {order_id} for this reference", order_id=order_id)
    d.ship(refs["order_resolved"])
    d.wait(refs["order_resolved"], *SETTLED)

    d.fault("/notify", "rate_limit", retry_after=900)  # the order went out; the confirmation waits
    d.decide(refs["order_submitted_then_retrying"])
    d.ship(refs["order_submitted_then_retrying"])
    d.wait(refs["order_submitted_then_retrying"], Status.RETRY_PENDING)

    execution_cancel(ref=refs["report_cancelled"], user=people["requester"].user, reason="not needed any more")
    d.decide(refs["report_rejected"], "reject", "wrong month")
    d.decide(refs["order_rejected"], "reject", "customer withdrew the claim")
    execution_redraft(
        ref=refs["report_superseded_by_redraft"], user=people["requester"].user, instruction="Add a store ranking"
    )
    d.decide(refs["report_changes_requested"], "request_changes", "Explain the **Eindhoven** dip")
    d.pending(refs["report_superseded_by_redraft"], version=2)
    d.pending(refs["report_changes_requested"], version=2)

    # Time passes for two requests: the sweeper expires them (needs_attention, or cancel by policy).
    for name in ("report_approval_expired", "order_approval_expired"):
        ApprovalRequest.objects.filter(execution_id=pk(refs[name]), status="pending").update(
            expires_at=timezone.now() - dt.timedelta(seconds=1)
        )
    d.wait(refs["report_approval_expired"], Status.NEEDS_ATTENTION)
    d.wait(refs["order_approval_expired"], Status.CANCELLED)

    for worker in workers:
        worker.stop()  # nobody claims the last one: it stays pending
    refs["report_pending"] = d.start("monthly_report", **report)
    return refs
