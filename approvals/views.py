"""The approval card's POST: the form checked like the API's body, then one call to
approvals.services.approval_decide; any refusal is a message on the card."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from executions import inputs
from executions.errors import NotFound, ServiceError
from executions.services import execution_for
from executions.views import detail_context

from .services import approval_decide


@login_required
@require_POST
def decide(request: HttpRequest, ref: str, approval_id: int) -> HttpResponse:
    error = outcome = None
    try:
        form = inputs.parse(
            inputs.DecisionIn,
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
                request, f"Recorded: {outcome.get_decision_display().lower()} V{outcome.artifact_version}."
            )
        return redirect("executions:detail", ref=ref)
    try:
        execution = execution_for(ref)
    except NotFound:
        raise Http404(f"no execution {ref}") from None
    context = detail_context(request, execution)
    context.update(decision_error=error, decision_made=outcome)
    # Always 200: htmx swaps only successful answers, and the card carries the message.
    return render(request, "executions/detail.html#approval_card", context)
