"""Operator screens of the triage console: the resume preview (the Resume button's
confirmation page), moving to another version (its preview and confirmation), restart
from a step, accepting a drifted model call's new request, closing a compensation,
raising a budget, placing or releasing a legal hold and reminding the managers. Thin:
one service call each (the API's and the CLI's); a refusal is a message on the
execution page, never a 500 — a refusal of what was typed into one of the execution
page's forms is that form again, filled in (``views.refused_form``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from executions import inputs, selectors, services
from executions.authoring import registry
from executions.errors import Conflict, Forbidden, InvalidInput, NotFound, ServiceError
from executions.inputs import ReasonIn
from executions.models import Status
from notifications import remind
from retention import holds
from triage import compensations, drift, migration, restart
from triage.inputs import AcceptRequestIn, CloseFormIn, MigrateIn, RestartIn
from triage.preview import execution_resume_preview

from . import presenters
from .views import refused_form


@contextmanager
def _as_http() -> Iterator[None]:
    """A service's Forbidden as the page's 403, its NotFound as the 404 page."""
    try:
        yield
    except Forbidden as exc:
        raise PermissionDenied(exc.message) from None
    except NotFound as exc:
        raise Http404(exc.message) from None


@login_required
@require_GET
def resume_preview(request: HttpRequest, ref: str) -> HttpResponse:
    """What a resume would skip, run and risk, with the reason field and the confirm
    button (it posts to the resume form's view) when nothing blocks it."""
    with _as_http():
        preview = execution_resume_preview(ref=ref, user=request.user)
    execution = selectors.execution(ref)
    context = {
        "execution": execution,
        "label": selectors.step_label(execution),
        "stuck": selectors.triage_fields(execution)["stuck"],
        "plan": presenters.resume_plan(preview),
    }
    return render(request, "executions/resume_preview.html", context)


@login_required
def execution_migrate(request: HttpRequest, ref: str) -> HttpResponse:
    """GET ``?to=N``: the migration preview (triage.migration), each blocker an operator may
    accept with a box to tick, the reason and the confirm button; POST: the move, then
    the execution's page — or this page again with the refusal."""
    raw = request.POST.get("to_version") if request.method == "POST" else request.GET.get("to")
    to: object = raw
    if raw and raw.isascii() and raw.isdigit() and len(raw) < 10:
        to = int(raw)
    status = 200
    if request.method == "POST":
        accept = request.POST.getlist("accept")
        try:
            body = inputs.parse(
                MigrateIn, {"to_version": to, "reason": request.POST.get("reason", ""), "accept": accept}
            )
            with _as_http():
                moved = migration.execution_migrate(
                    ref=ref, user=request.user, to_version=body.to_version, reason=body.reason, accept=body.accept
                )
        except ServiceError as exc:
            messages.error(request, exc.message)
            status = 409 if isinstance(exc, Conflict) else 422
        else:
            messages.success(request, f"{ref} moved to v{moved.workflow_version} ({moved.status}).")
            return redirect("console:detail", ref=ref)
    elif request.method != "GET":
        return HttpResponseNotAllowed(["GET", "POST"])
    try:
        with _as_http():
            move = migration.execution_migrate_plan(ref=ref, user=request.user, to=to)
    except InvalidInput as exc:
        messages.error(request, exc.message)
        return redirect("console:detail", ref=ref)
    execution = move.execution
    context = {
        "execution": execution,
        "label": selectors.step_label(execution),
        "preview": move.as_dict(),
        "impossible": move.impossible,
        "acceptable": move.acceptable,
        "versions": [v for v in registry.versions(execution.workflow) if v != execution.workflow_version],
    }
    return render(request, "executions/migrate.html", context, status=status)


@login_required
@require_POST
def execution_restart(request: HttpRequest, ref: str) -> HttpResponse:
    """Restart a failed execution from the chosen step; the new execution's page follows.
    A refused reason or step is the page again with the choice and the reason typed (422)."""
    fields = {name: request.POST.get(name, "").strip() for name in ("from_step", "reason")}
    # A step visited more than once is offered once per visit, as ``step@N`` (presenters.restart_form).
    step, at, visit = fields["from_step"].rpartition("@")
    if at and step and visit.isdigit():
        fields.update(from_step=step, visit=int(visit))
    try:
        form = inputs.parse(RestartIn, {**fields, "accept_repeats": request.POST.get("accept_repeats") == "true"})
        restarted = restart.execution_restart(
            ref=ref,
            user=request.user,
            from_step=form.from_step,
            reason=form.reason,
            accept_repeats=form.accept_repeats,
            visit=form.visit,
        )
    except InvalidInput as exc:
        typed = {"from_step": 120, "reason": 2000, "accept_repeats": 10}  # the step as posted: ``step@N``
        return refused_form(request, ref, form="restart", error=exc.message, fields=typed)
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect("console:detail", ref=ref)
    messages.success(request, f"Restarted {ref} from {form.from_step} as {restarted.ref}.")
    return redirect("console:detail", ref=restarted.ref)


@login_required
@require_POST
def accept_request(request: HttpRequest, ref: str) -> HttpResponse:
    """Accept the request a drifted model call's step rebuilt (its key and sha256 as the
    page showed them): the execution resumes and the model is asked again for that call.
    A refused reason (none, too long) is the page again with it typed (422)."""
    try:
        form = _form(request, AcceptRequestIn)
        drift.execution_accept_request(
            ref=ref, user=request.user, key=form.key, request_sha256=form.request_sha256, reason=form.reason
        )
    except InvalidInput as exc:
        return refused_form(request, ref, form="accept_request", error=exc.message, fields={"reason": 2000})
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Accepted the new request for {form.key}; {ref} is running again.")
    return redirect("console:detail", ref=ref)


@login_required
@require_POST
def compensation_close(request: HttpRequest, ref: str) -> HttpResponse:
    """Close a planned compensation (operators) as carried out or not possible, with the
    evidence. A refused outcome or evidence is the page again with both typed beside
    that compensation (422); in the messages when the page draws no form for its key."""
    try:
        form = _form(request, CloseFormIn)
        action = compensations.action_close(
            key=form.key, user=request.user, outcome=form.outcome, evidence=form.evidence
        )
    except InvalidInput as exc:
        typed = {"key": 200, "outcome": 20, "evidence": inputs.MAX_COMMENT}
        return refused_form(request, ref, form="close", error=exc.message, fields=typed)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Closed {action.key} as {action.status}.")
    return redirect("console:detail", ref=ref)


@login_required
@require_POST
def execution_budget(request: HttpRequest, ref: str) -> HttpResponse:
    """Raise the budget (operators) by the amount typed, with the reason: the service the
    API's ``POST …/budget`` and ``keel budget`` call, audited as ``raise_budget``. A
    refused amount or reason is the page again with both typed (422)."""
    try:
        execution = services.execution_raise_budget(
            ref=ref,
            user=request.user,
            add_usd=_usd(request.POST.get("add_usd", "")),
            reason=_form(request, ReasonIn).reason,  # at most 2,000 characters, storable (as the hold's)
        )
    except InvalidInput as exc:
        error = f"The budget was not raised: {exc.message}"
        return refused_form(request, ref, form="budget", error=error, fields={"add_usd": 100, "reason": 2000})
    except ServiceError as exc:
        messages.error(request, f"The budget was not raised: {exc.message}")
    else:
        messages.success(
            request,
            f"Raised the budget of {ref} to ${execution.budget_usd}."
            + (" Resume it to go on." if execution.status == Status.NEEDS_ATTENTION else ""),
        )
    return redirect("console:detail", ref=ref)


@login_required
@require_POST
def execution_hold(request: HttpRequest, ref: str) -> HttpResponse:
    """Place (``hold=place``, with the reason) or release a legal hold (auditors): the
    service the API's ``POST``/``DELETE …/hold`` and ``keel hold|unhold`` call. A refused
    reason (none, too long) is the page again with it typed (422)."""
    placing = request.POST.get("hold") == "place"
    try:
        if placing:
            holds.hold_place(ref=ref, user=request.user, reason=_form(request, ReasonIn).reason)
        else:
            holds.hold_release(ref=ref, user=request.user)
    except InvalidInput as exc:
        error = f"The legal hold was not {'placed' if placing else 'released'}: {exc.message}"
        return refused_form(request, ref, form="hold", error=error, fields={"reason": 2000})
    except ServiceError as exc:
        messages.error(request, f"The legal hold was not {'placed' if placing else 'released'}: {exc.message}")
    else:
        messages.success(
            request,
            f"{ref} is on legal hold: it is never archived while the hold stands."
            if placing
            else f"Released the legal hold of {ref}: retention may archive it once it is old enough.",
        )
    return redirect("console:detail", ref=ref)


@login_required
@require_POST
def approval_remind(request: HttpRequest, ref: str) -> HttpResponse:
    """Remind the managers who may decide the pending request (operators): one e-mail each
    through the ledger, audited; a second press within the window sends nothing again. A
    refused reason (none, too long, not storable) is the page again with it typed (422)."""
    try:
        reminded = remind.approval_remind(ref=ref, user=request.user, reason=_form(request, ReasonIn).reason)
    except InvalidInput as exc:
        error = f"Nobody was reminded: {exc.message}"
        return refused_form(request, ref, form="remind", error=error, fields={"reason": 2000})
    except ServiceError as exc:
        messages.error(request, f"Nobody was reminded: {exc.message}")
    else:
        if reminded.fresh:
            messages.success(request, f"Reminded {', '.join(reminded.to)} by e-mail to decide on {ref}.")
        else:
            messages.info(
                request,
                f"The managers ({', '.join(reminded.to) or 'those who may decide'}) were reminded at "
                f"{reminded.at:%H:%M:%S} UTC{f' by {reminded.by}' if reminded.by else ''}: nothing sent again. "
                f"The next reminder can go at {reminded.again_at:%Y-%m-%d %H:%M:%S} UTC.",
            )
    return redirect("console:detail", ref=ref)


def _usd(raw: str) -> Decimal:
    """A form's amount of US dollars as a number for ``usd_amount``, or InvalidInput naming ``add_usd``."""
    try:
        return Decimal(raw.strip().removeprefix("$").strip())
    except InvalidOperation:
        raise InvalidInput("add_usd", "must be a number of US dollars, e.g. 2.5") from None


def _form(request: HttpRequest, schema: type[inputs.S]) -> inputs.S:
    """The form's fields named in ``schema``, stripped and checked like the API's body."""
    return inputs.parse(schema, {name: request.POST.get(name, "").strip() for name in schema.model_fields})
