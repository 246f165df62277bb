"""The decision POST of the approval card and the approval page: the form checked like
the API's body, then one call to approvals.services.approval_decide.

Where the manager goes next depends on where they decided:
- the execution page's card (htmx): the card, re-rendered with the outcome;
- the approval page (its form sends ``then=inbox``): on success the next pending
  item of their inbox, or the inbox saying nothing is left; on a refusal back to
  the approval page, which says why;
- a plain form without ``then``: the execution page.

Rejecting is final (the execution is cancelled), so the screens ask twice: a Reject
button shows the confirmation (what a reject does, and a reason, required here though
the API keeps ``comment`` optional); only its "Confirm reject" (``confirm=reject``)
decides. A confirmation refused (no reason, a stale version, …) is shown again with
the message and the reason typed, never a redirect that drops it.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from approvals import policy, selectors
from approvals.events import DecisionIn
from approvals.services import approval_decide
from executions import inputs
from executions.errors import InvalidInput, NotFound, ServiceError
from executions.services import execution_for

from .views import detail_context

THEN_INBOX = "inbox"
CONFIRM_REJECT = "reject"
REJECT_NEEDS_REASON = "say why you reject it: the reason is recorded with the decision and the requester sees it"


@login_required
@require_POST
def decide(request: HttpRequest, ref: str, approval_id: int) -> HttpResponse:
    error = outcome = None
    rejecting = request.POST.get("decision") == "reject"
    confirmed = rejecting and request.POST.get("confirm") == CONFIRM_REJECT
    try:
        form = inputs.parse(
            DecisionIn,
            {
                "approval_id": approval_id,
                "decision": request.POST.get("decision", ""),
                "artifact_version": request.POST.get("artifact_version", "").strip(),
                "content_sha256": request.POST.get("content_sha256", "").strip(),
                "event_id": request.POST.get("event_id", ""),
                "comment": request.POST.get("comment", "").strip(),
            },
        )
        if rejecting and not confirmed:
            return _confirm_reject(request, ref, approval_id)
        if rejecting and not form.comment:
            raise InvalidInput("comment", REJECT_NEEDS_REASON)
        result = approval_decide(
            user=request.user,
            execution_ref=ref,
            approval_id=form.approval_id,
            decision=form.decision,
            artifact_version=form.artifact_version,
            content_sha256=form.content_sha256,
            event_id=form.event_id,
            comment=form.comment,
        )
        outcome = result.decision
    except ServiceError as exc:
        error = exc.message
        if confirmed:
            return _confirm_reject(request, ref, approval_id, error=error, status=exc.status_code)
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.success(
                request,
                f"Recorded: {outcome.get_decision_display().lower()} V{outcome.artifact_version} of {ref}.",
            )
        if request.POST.get("then") == THEN_INBOX:
            return _to_inbox(request, approval_id=approval_id, decided=error is None)
        return redirect("console:detail", ref=ref)
    try:
        execution = execution_for(ref)
    except NotFound:
        raise Http404(f"no execution {ref}") from None
    context = detail_context(request, execution)
    context.update(decision_error=error, decision_made=outcome)
    # Always 200: htmx swaps only successful answers, and the card carries the message.
    return render(request, "executions/detail.html#approval_card", context)


def _confirm_reject(
    request: HttpRequest, ref: str, approval_id: int, *, error: str = "", status: int = 200
) -> HttpResponse:
    """The reject confirmation with what was typed: inside the card (htmx, always 200 so
    htmx swaps it) or as a page of its own (``status`` when refused). When the request
    can't be decided by this user any more, the card (or the redirect) says why instead."""
    approval = selectors.approval_for(approval_id)
    if approval is None or approval.execution.ref != ref:
        raise Http404(f"no approval request {approval_id} on {ref}")
    confirm = {
        "event_id": request.POST.get("event_id", "")[:100],
        "comment": request.POST.get("comment", "")[:4000],
        "then": request.POST.get("then", "") if request.POST.get("then") == THEN_INBOX else "",
        "error": error,
        "continues_at": selectors.reject_continues_at(approval),
    }
    decidable = selectors.is_open(approval) and policy.can_decide(request.user, approval)
    if request.htmx:
        context = detail_context(request, approval.execution)
        if decidable:
            context.update(reject_confirm=confirm)
        else:
            context.update(decision_error=error or "this request can no longer be decided")
        return render(request, "executions/detail.html#approval_card", context)
    if not decidable:
        messages.error(request, error or "This request can no longer be decided.")
        return redirect("approvals:detail", pk=approval_id) if confirm["then"] else redirect("console:detail", ref=ref)
    context = {"approval": approval, "execution": approval.execution, "reject_confirm": confirm}
    return render(request, "approvals/reject_confirm.html", context, status=status)


def _to_inbox(request: HttpRequest, *, approval_id: int, decided: bool) -> HttpResponse:
    """After a decision on the approval page: the next item, or the inbox when none is left."""
    approval = selectors.approval_for(approval_id)
    if not decided or approval is None:
        return redirect("approvals:detail", pk=approval_id) if approval else redirect("approvals:inbox")
    following = selectors.next_in_inbox(request.user, after=approval)
    if following is None:
        messages.info(request, "Nothing else is waiting for your decision.")
        return redirect("approvals:inbox")
    messages.info(request, f"Next in your inbox: approval #{following.pk} for {following.execution.ref}.")
    return redirect("approvals:detail", pk=following.pk)
