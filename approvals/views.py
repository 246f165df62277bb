"""The approval card's POST: one call to approvals.services.approval_decide."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from executions.errors import NotFound, ServiceError
from executions.services import execution_for
from executions.views import detail_context

from .services import approval_decide


@login_required
@require_POST
def decide(request: HttpRequest, ref: str, approval_id: int) -> HttpResponse:
    try:
        version = int(request.POST.get("artifact_version", ""))
    except ValueError:
        version = 0
    error = outcome = None
    try:
        result = approval_decide(
            user=request.user,
            execution_ref=ref,
            approval_id=approval_id,
            decision=request.POST.get("decision", ""),
            artifact_version=version,
            content_sha256=request.POST.get("content_sha256", ""),
            event_id=request.POST.get("event_id", ""),
            comment=request.POST.get("comment", "").strip(),
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
