"""Screens for executions (htmx). Thin: read through selectors, write through services."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from approvals import policy
from approvals import services as approval_services
from approvals.models import ApprovalRequest
from artifacts.rendering import render_artifact

from . import inputs, registry, selectors, services
from .errors import NotFound, ServiceError
from .models import Execution, Status


def _execution_or_404(ref: str) -> Execution:
    try:
        return services.execution_for(ref)
    except NotFound:
        raise Http404(f"no execution {ref}") from None


@login_required
@require_GET
def execution_list(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status") or None
    workflow = request.GET.get("workflow") or None
    try:
        filters = inputs.parse(
            inputs.ListFilters, {"status": status, "workflow": workflow, "cursor": request.GET.get("cursor") or None}
        )
        page, following = selectors.execution_page(status=status, workflow=workflow, cursor=filters.cursor)
    except ServiceError as exc:
        messages.error(request, exc.message)
        status = workflow = None
        page, following = selectors.execution_page()
    return render(
        request,
        "executions/list.html",
        {
            "executions": [(e, selectors.step_label(e)) for e in page],
            "next_cursor": following,
            "statuses": Status.choices,
            "status": status or "",
            "workflows": registry.names(),
            "workflow": workflow or "",
        },
    )


@login_required
@require_GET
def status_cell(request: HttpRequest, ref: str) -> HttpResponse:
    execution = _execution_or_404(ref)
    return render(
        request,
        "executions/list.html#status_cell",
        {"execution": execution, "label": selectors.step_label(execution)},
    )


@login_required
@require_POST
def execution_start(request: HttpRequest) -> HttpResponse:
    data = {"month": request.POST["month"]} if request.POST.get("month") else {}
    try:
        start = inputs.parse(inputs.StartIn, {"workflow": request.POST.get("workflow", ""), "input": data})
        execution, _ = services.execution_start(user=request.user, workflow=start.workflow, input=start.input)
    except ServiceError as exc:
        messages.error(request, f"Could not start: {exc.message}")
        return redirect("executions:list")
    messages.success(request, f"Started {execution.ref}.")
    return redirect("executions:detail", ref=execution.ref)


def detail_context(request: HttpRequest, execution: Execution) -> dict:
    request_obj = selectors.pending_approval(execution)
    versions = list(selectors.artifact_versions(execution))
    latest = versions[-1] if versions else None
    return {
        "execution": execution,
        "label": selectors.step_label(execution),
        "events": execution.events.select_related("actor").all(),
        "actions": execution.actions.all(),
        "versions": versions,
        "latest": latest,
        "approval": request_obj,
        "decisions": ApprovalRequest.objects.filter(execution=execution).select_related("decision__decided_by"),
        "can_decide": _can_decide(request.user, request_obj),
        "can_cancel": not execution.is_terminal
        and (request.user.has_perm(services.OPERATE) or execution.created_by_id == request.user.pk),
        "can_resume": execution.status == Status.NEEDS_ATTENTION and request.user.has_perm(services.OPERATE),
        "can_resolve": execution.status == Status.NEEDS_ATTENTION and request.user.has_perm(services.OPERATE),
        "can_redraft": request_obj is not None
        and (request.user.has_perm(services.OPERATE) or execution.created_by_id == request.user.pk),
        "event_id": uuid.uuid4().hex,
    }


def _can_decide(user, approval: ApprovalRequest | None) -> bool:
    return approval is not None and policy.can_decide(user, approval)


@login_required
@require_GET
def execution_detail(request: HttpRequest, ref: str) -> HttpResponse:
    execution = _execution_or_404(ref)
    context = detail_context(request, execution)
    # Rendered for the full page only: the live partials poll and never show it.
    context["latest_html"] = render_artifact(context["latest"]) if context["latest"] else ""
    return render(request, "executions/detail.html", context)


@login_required
@require_GET
def execution_live(request: HttpRequest, ref: str) -> HttpResponse:
    execution = _execution_or_404(ref)
    part = "live_panels" if request.GET.get("part") == "panels" else "live_head"
    return render(request, f"executions/detail.html#{part}", detail_context(request, execution))


@login_required
@require_POST
def execution_cancel(request: HttpRequest, ref: str) -> HttpResponse:
    return _operate(
        request,
        ref,
        lambda: services.execution_cancel(ref=ref, user=request.user, reason=_form(request, inputs.ReasonIn).reason),
        lambda execution: f"Cancelled {execution.ref}.",
    )


@login_required
@require_POST
def execution_resume(request: HttpRequest, ref: str) -> HttpResponse:
    return _operate(
        request,
        ref,
        lambda: services.execution_resume(ref=ref, user=request.user, reason=_form(request, inputs.ReasonIn).reason),
        lambda execution: f"Resumed {execution.ref}.",
    )


@login_required
@require_POST
def action_resolve(request: HttpRequest, ref: str) -> HttpResponse:
    def resolve():
        form = _form(request, inputs.ResolveFormIn)
        return services.action_resolve(key=form.key, user=request.user, outcome=form.outcome, evidence=form.evidence)

    return _operate(request, ref, resolve, lambda action: f"Resolved {action.key} as {action.status}.")


@login_required
@require_POST
def execution_redraft(request: HttpRequest, ref: str) -> HttpResponse:
    return _operate(
        request,
        ref,
        lambda: approval_services.execution_redraft(
            ref=ref, user=request.user, instruction=_form(request, inputs.RedraftIn).instruction
        ),
        lambda execution: f"Asked for a new draft of {execution.ref}; the pending approval was superseded.",
    )


def _form(request: HttpRequest, schema: type[inputs.S]) -> inputs.S:
    """The form's fields named in ``schema``, stripped and checked like the API's body."""
    return inputs.parse(schema, {name: request.POST.get(name, "").strip() for name in schema.model_fields})


def _operate(request: HttpRequest, ref: str, call, success) -> HttpResponse:
    """Run one service call for an operator form; its refusal becomes a message, never a 500."""
    try:
        result = call()
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, success(result))
    return redirect("executions:detail", ref=ref)
