"""Screens for executions (htmx). Thin: read through selectors, write through services."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from approvals import services as approval_services
from artifacts.rendering import render_artifact
from executions import catalogue, inputs, pauses, questions, selectors, services, stuck, waits
from executions.errors import InvalidInput, NotFound, ServiceError
from executions.models import Action, Execution, Status, execution_for
from executions.storable import text_refusal
from triage import preview, tallies

from . import page


def _execution_or_404(ref: str) -> Execution:
    """The execution, annotated with why it may be stuck (executions.stuck)."""
    execution = selectors.execution(ref)
    if execution is None:
        try:
            execution_for(ref)  # NotFound, or Gone when it was archived: the error page says where it is (410)
        except NotFound as missing:
            raise Http404(missing) from None
        raise Http404(f"no execution {ref}")  # (it appeared meanwhile: the next look finds it)
    return execution


def _live_url(name: str, stamps: dict[str, str], *args: str, **query: str) -> str:
    params = {k: v for k, v in query.items() if v}
    params["stamp"] = page.make_token(stamps)
    return f"{reverse(name, args=args)}?{urlencode(params)}"


def _no_change() -> HttpResponse:
    return HttpResponse(status=204)


# --- the list


def _list_filters(request: HttpRequest) -> dict[str, str]:
    """The list's filters; a value the database can't hold is refused with a message (the
    list shows unfiltered)."""
    raw = {name: request.GET.get(name) or None for name in ("status", "workflow", "reason", "cursor", "input")}
    try:
        filters = inputs.parse(inputs.ListFilters, raw)
    except InvalidInput as exc:
        if not request.htmx:
            messages.error(request, exc.message)
        return {**dict.fromkeys(raw, ""), "hold": ""}
    hold = request.GET.get("hold") or ""
    return {**{name: getattr(filters, name) or "" for name in raw}, "hold": hold if hold in ("yes", "no") else ""}


def _list_rows(request: HttpRequest, filters: dict[str, str]) -> tuple[list[Execution], str | None]:
    try:
        return selectors.execution_page(
            status=filters["status"] or None,
            workflow=filters["workflow"] or None,
            reason=filters["reason"] or None,
            cursor=filters["cursor"] or None,
            hold={"yes": True, "no": False}.get(filters["hold"]),
            input=filters["input"].strip() or None,
        )
    except ServiceError as exc:
        if not request.htmx:
            messages.error(request, exc.message)
        return selectors.execution_page()


def _list_context(request: HttpRequest, filters: dict[str, str], rows, following, nav) -> dict:
    counts = tallies.summary()
    stamps = {**page.list_stamps(rows), **nav.stamps(), "counts": page.digest(counts)}
    return {
        "executions": page.list_rows(rows),
        "next_cursor": following,
        "statuses": Status.choices,
        "reasons": stuck.REASONS,
        "counts": page.count_links(counts),
        "status": filters["status"],
        "workflow": filters["workflow"],
        "reason": filters["reason"],
        "hold": filters["hold"],
        "input": filters["input"],
        "workflows": catalogue.names(),
        "start_key": uuid.uuid4().hex,  # the quick start forms' idempotency key, made as they are drawn
        "nav": nav,
        "live_url": _live_url("console:live_list", stamps, **filters),
        "stamps": stamps,
    }


@login_required
@require_GET
def execution_list(request: HttpRequest) -> HttpResponse:
    filters = _list_filters(request)
    rows, following = _list_rows(request, filters)
    return render(
        request, "executions/list.html", _list_context(request, filters, rows, following, page.Nav(request.user))
    )


@login_required
@require_GET
def list_live(request: HttpRequest) -> HttpResponse:
    """The list's poll: the visible rows (new ones included) and the nav, when they changed."""
    filters = _list_filters(request)
    rows, following = _list_rows(request, filters)
    context = _list_context(request, filters, rows, following, page.Nav(request.user))
    changed = page.changed_panels(context["stamps"], request.GET.get("stamp"))
    if not changed:
        return _no_change()
    return render(request, "executions/list.html#live_update", {**context, "changed": changed})


@login_required
@require_GET
def nav_live(request: HttpRequest) -> HttpResponse:
    """The poll of pages without live panels of their own: the nav's inbox count."""
    nav = page.Nav(request.user)
    stamps = nav.stamps()
    changed = page.changed_panels(stamps, request.GET.get("stamp"))
    if not changed:
        return _no_change()
    return render(request, "_live_update.html", {"nav": nav, "changed": changed, "live_url": nav.poll_url})


START_FIELDS = ("month", "ticket", "quarter")


@login_required
@require_POST
def execution_start(request: HttpRequest) -> HttpResponse:
    workflow = request.POST.get("workflow", "")
    # Each start form sends its workflow's one field; the workflow validates it (a 422's message here).
    data = {name: request.POST[name].strip() for name in START_FIELDS if request.POST.get(name)}
    key = request.POST.get("idempotency_key", "").strip()[:200] or None  # a double click starts one
    try:
        execution, _ = services.execution_start(user=request.user, workflow=workflow, input=data, idempotency_key=key)
    except ServiceError as exc:
        messages.error(request, f"Could not start: {exc.message}")
        return redirect("console:list")
    messages.success(request, f"Started {execution.ref}.")
    return redirect("console:detail", ref=execution.ref)


# --- the execution page


def detail_context(request: HttpRequest, execution: Execution) -> dict:
    """What the approval card needs (the decide view re-renders the card with it)."""
    return page.panel_context(request, page.snapshot(execution), ("approval",))


def _render_detail(
    request: HttpRequest,
    execution: Execution,
    *,
    status: int = 200,
    refused: page.RefusedForm | None = None,
) -> HttpResponse:
    snap = page.snapshot(execution)  # before any panel is read: a panel is never older than its stamp
    nav = page.Nav(request.user)
    stamps = {**page.execution_stamps(snap), **nav.stamps()}
    context = page.panel_context(request, snap, page.EXECUTION_PANELS, refused=refused)
    context.update(
        nav=nav,
        latest_html=render_artifact(context["latest"]) if context["latest"] else "",
        live_url=_live_url("console:live", stamps, execution.ref),
    )
    if refused is not None and not context["refused"]:
        messages.error(request, refused.error)  # no such form on this page to show it beside
    return render(request, "executions/detail.html", context, status=status)


def refused_form(request: HttpRequest, ref: str, *, form: str, error: str, fields: Mapping[str, int]) -> HttpResponse:
    """The execution page again (422), ``error`` beside the form ``form`` (in the messages
    when the page draws no such form) and what was typed into its ``fields`` filled in
    (each name: the most characters shown again). Only this response is filled in."""
    typed = {name: _typed(request, name, limit) for name, limit in fields.items()}
    refused = page.RefusedForm(form=form, typed=typed, error=error)
    return _render_detail(request, _execution_or_404(ref), status=422, refused=refused)


@login_required
@require_GET
def execution_detail(request: HttpRequest, ref: str) -> HttpResponse:
    return _render_detail(request, _execution_or_404(ref))


@login_required
@require_GET
def execution_live(request: HttpRequest, ref: str) -> HttpResponse:
    """The page's poll: 204 when nothing changed, else the changed panels (out of band)."""
    execution = _execution_or_404(ref)
    snap = page.snapshot(execution)
    nav = page.Nav(request.user)
    stamps = {**page.execution_stamps(snap), **nav.stamps()}
    changed = page.changed_panels(stamps, request.GET.get("stamp"))
    if not changed:
        return _no_change()
    context = page.panel_context(request, snap, changed)
    if "artifact" in changed:
        context["latest_html"] = render_artifact(context["latest"]) if context["latest"] else ""
    context.update(nav=nav, changed=changed, live_url=_live_url("console:live", stamps, execution.ref))
    return render(request, "executions/detail.html#live_update", context)


@login_required
@require_http_methods(["GET", "POST"])
def execution_cancel(request: HttpRequest, ref: str) -> HttpResponse:
    """The Cancel button's confirmation page (GET): what a cancel would do, and the reason
    it needs; the confirmed form posts here. A missing reason shows the page again with
    the message (422); any other refusal is a message on the execution page."""
    execution = _execution_or_404(ref)
    if not (request.user.has_perm(services.OPERATE) or execution.created_by_id == request.user.pk):
        raise PermissionDenied("only operators or the user who started it may cancel it")
    if request.method == "GET":
        return _cancel_page(request, execution)
    try:
        reason = _form(request, inputs.ReasonIn).reason
        services.execution_cancel(ref=ref, user=request.user, reason=reason)
    except InvalidInput as exc:
        return _cancel_page(request, execution, error=exc.message, status=422)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Cancelled {execution.ref}.")
    return redirect("console:detail", ref=execution.ref)


def _cancel_page(request: HttpRequest, execution: Execution, *, error: str = "", status: int = 200) -> HttpResponse:
    context = {
        "execution": execution,
        "label": selectors.step_label(execution),
        "consequences": preview.cancel_preview(execution),
        "error": error,
        "reason": typed if text_refusal(typed := request.POST.get("reason", "")[:2000]) is None else "",
    }
    return render(request, "executions/cancel_confirm.html", context, status=status)


@login_required
@require_POST
def execution_retry(request: HttpRequest, ref: str) -> HttpResponse:
    """Retry now (operators): a retry_pending execution is due now instead of at its backoff
    time. A refused reason (none, too long) is the page again with it typed (422)."""
    return _operate(
        request,
        ref,
        lambda: services.execution_retry_now(ref=ref, user=request.user, reason=_form(request, inputs.ReasonIn).reason),
        lambda execution: (
            f"{execution.ref} is due now: the next worker to claim it runs {execution.current_step} again."
        ),
        form="retry",
        fields={"reason": 2000},
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
def execution_pause(request: HttpRequest, ref: str) -> HttpResponse:
    """Pause (operators): the execution is held where it is until resumed. A refused
    reason (none, too long) is the page again with it typed (422)."""
    return _operate(
        request,
        ref,
        lambda: pauses.execution_pause(ref=ref, user=request.user, reason=_form(request, inputs.ReasonIn).reason),
        lambda execution: f"Paused {execution.ref}: resume returns it to {execution.paused_from}.",
        form="pause",
        fields={"reason": 2000},
    )


@login_required
@require_POST
def execution_signal(request: HttpRequest, ref: str) -> HttpResponse:
    """The signal an execution waits for, sent from its page with a reason (recorded
    with the signal); the payload, if given, is JSON. The form's event_id makes a
    double submit one delivery. Refused input (the JSON, the wait's schema, the reason)
    re-renders the page with the message beside the form and what was typed kept (422),
    having written nothing; other refusals are messages."""

    def deliver():
        form = _form(request, inputs.SignalFormIn)
        try:
            payload = json.loads(form.payload) if form.payload.strip() else None
        except json.JSONDecodeError as exc:
            raise InvalidInput("payload", f"not valid JSON ({exc.msg})") from None
        inputs.parse(waits.SignalIn, {"name": form.name, "payload": payload, "event_id": form.event_id})
        return waits.signal_deliver(
            ref=ref, user=request.user, name=form.name, payload=payload, event_id=form.event_id, reason=form.reason
        )

    return _operate(
        request,
        ref,
        deliver,
        lambda answer: f"Sent the signal; {ref} is {answer['execution_status']}.",
        form="signal",
        fields={"payload": inputs.MAX_COMMENT, "reason": 2000},
    )


@login_required
@require_POST
def execution_answer(request: HttpRequest, ref: str) -> HttpResponse:
    """The answer to a question a tool's provider asked (``pending_input``), from the form
    drawn from its schema (``page.answer_fields``); the form's event_id makes a double
    submit one answer. An answer its schema refuses is the page again with the message
    beside the form and what was typed kept (422); other refusals (nothing asked) are messages."""

    def deliver():
        input_id = request.POST.get("input_id", "")
        pending = questions.pending_question(execution_for(ref), input_id)
        answer = page.answer_from_form(pending.schema if pending else {}, request.POST)
        body = {
            "type": "input.answer",
            "input_id": input_id,
            "answer": answer,
            "event_id": request.POST.get("event_id"),
        }
        parsed = inputs.parse(questions.AnswerEventIn, body)  # as the API reads it: the same refusals
        return questions.answer_deliver(
            ref=ref, user=request.user, input_id=parsed.input_id, answer=parsed.answer, event_id=parsed.event_id
        )

    return _operate(
        request,
        ref,
        deliver,
        lambda answer: f"Answered; {ref} is {answer['execution_status']}.",
        form="answer",
        fields={name: 2000 for name in request.POST if name.startswith("answer.")},
    )


@login_required
@require_POST
def execution_chat(request: HttpRequest, ref: str) -> HttpResponse:
    """The chat's message box: the customer's next message (``customer_message``, its text
    1–2,000 characters), or ``close``. A refusal (an empty message, not waiting) is a
    message on the page; the form's event_id makes a double submit one delivery."""
    closing = request.POST.get("do") == "close"
    text = request.POST.get("text", "")

    def deliver():
        event_id = inputs.parse(
            waits.SignalIn, {"name": "close", "event_id": request.POST.get("event_id", "")}
        ).event_id
        if closing:
            return waits.signal_deliver(ref=ref, user=request.user, name="close", payload=None, event_id=event_id)
        return waits.signal_deliver(
            ref=ref, user=request.user, name="customer_message", payload={"text": text}, event_id=event_id
        )

    said = "Closed the chat" if closing else "Sent your message"
    return _operate(request, ref, deliver, lambda answer: f"{said}; {ref} is {answer['execution_status']}.")


@login_required
@require_POST
def action_resolve(request: HttpRequest, ref: str) -> HttpResponse:
    """The operator's Resolve form. Bad input re-renders the page with the message
    beside the form and what was typed kept (422); other refusals are messages."""
    key, outcome, evidence = (request.POST.get(name, "").strip() for name in ("key", "outcome", "evidence"))
    receipt = {
        name.removeprefix("receipt."): value.strip()
        for name, value in request.POST.items()
        if name.startswith("receipt.")
    }
    try:
        form = inputs.parse(
            inputs.ResolveFormIn,
            {"key": key, "outcome": outcome, "evidence": evidence, "receipt": receipt or None},
        )
        action = services.action_resolve(
            key=form.key, user=request.user, outcome=form.outcome, evidence=form.evidence, receipt=form.receipt
        )
    except InvalidInput as exc:
        # Shown beside that action's form with what was typed (in the messages when the
        # page has no such form: a key of no unknown outcome of this execution).
        typed = {name: inputs.MAX_RECEIPT_VALUE for name in request.POST if name.startswith("receipt.")}
        fields = {"key": 200, "outcome": 20, "evidence": inputs.MAX_COMMENT, **typed}
        return refused_form(request, ref, form="resolve", error=exc.message, fields=fields)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Resolved {action.key} as {action.status}.")
        status = Execution.objects.filter(pk=action.execution_id).values_list("status", flat=True).first()
        if action.status == Action.State.FAILED and status != Status.FAILED:  # its on_failure goes on
            when = (
                " once nothing else holds it (the resume preview says what)" if status == Status.NEEDS_ATTENTION else ""
            )
            messages.info(request, f"{ref} goes on at the step its effect names for a failure (on_failure){when}.")
        elif action.status == Action.State.FAILED:
            messages.warning(
                request,
                f"{ref} has failed. If {action.key} happened after all, the effect exists at the provider: "
                "check there before a restart, which would send it again under a new key.",
            )
    return redirect("console:detail", ref=ref)


@login_required
@require_POST
def execution_redraft(request: HttpRequest, ref: str) -> HttpResponse:
    """Ask for a new draft (the starter, operators) with the instruction for it. A refused
    instruction (none, too long) is the page again with it typed (422)."""
    return _operate(
        request,
        ref,
        lambda: approval_services.execution_redraft(
            ref=ref, user=request.user, instruction=_form(request, inputs.RedraftIn).instruction
        ),
        lambda execution: f"Asked for a new draft of {execution.ref}; the pending approval was superseded.",
        form="redraft",
        fields={"instruction": inputs.MAX_COMMENT},
    )


def _typed(request: HttpRequest, name: str, limit: int) -> str:
    """The form's field ``name`` as typed, to show again: at most ``limit`` characters,
    nothing when it can't be stored as text."""
    typed = request.POST.get(name, "")[:limit]
    return typed if text_refusal(typed) is None else ""


def _form(request: HttpRequest, schema: type[inputs.S]) -> inputs.S:
    """The form's fields named in ``schema``, stripped and checked like the API's body."""
    return inputs.parse(schema, {name: request.POST.get(name, "").strip() for name in schema.model_fields})


def _operate(
    request: HttpRequest, ref: str, call, success, *, form: str = "", fields: Mapping[str, int] | None = None
) -> HttpResponse:
    """Run one service call for an operator form; its refusal becomes a message, never a 500.
    With ``form``, a refusal of what was typed is that form again (``refused_form``)."""
    try:
        result = call()
    except ServiceError as exc:
        if form and isinstance(exc, InvalidInput):
            return refused_form(request, ref, form=form, error=exc.message, fields=fields or {})
        messages.error(request, exc.message)
    else:
        messages.success(request, success(result))
    return redirect("console:detail", ref=ref)
