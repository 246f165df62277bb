"""The decision POST of the approval card and the approval page: the form checked like
the API's body, then one call to approvals.services.approval_decide.

Where the manager goes next depends on where they decided:
- the execution page's card (htmx): the card, re-rendered with the outcome;
- the approval page (its form sends ``then=inbox``): on success the next pending
  item of their inbox, or the inbox saying nothing is left; on a refusal back to
  the approval page, which says why;
- a plain form without ``then``: the execution page.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from approvals import selectors
from approvals.events import DecisionIn
from approvals.services import approval_decide
from executions import inputs
from executions.errors import NotFound, ServiceError
from executions.services import execution_for

from .views import detail_context

THEN_INBOX = "inbox"


@login_required
@require_POST
def decide(request: HttpRequest, ref: str, approval_id: int) -> HttpResponse:
    error = outcome = None
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
        return redirect("executions:detail", ref=ref)
    try:
        execution = execution_for(ref)
    except NotFound:
        raise Http404(f"no execution {ref}") from None
    context = detail_context(request, execution)
    context.update(decision_error=error, decision_made=outcome)
    # Always 200: htmx swaps only successful answers, and the card carries the message.
    return render(request, "executions/detail.html#approval_card", context)


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
