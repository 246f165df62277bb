"""Bulk operations in the console (operators): from the list's filters, choose the
operation, read the dry run, confirm on exactly the ids it listed with a reason, read
each id's outcome. The rules live in ``triage.bulk``; these views only parse,
call it and render.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from executions import catalogue, inputs, selectors, stuck
from executions.errors import InvalidInput, ServiceError
from executions.models import Status
from executions.services import OPERATE
from triage import bulk
from triage.inputs import BulkFormIn

FILTERS = ("status", "workflow", "reason")
SESSION_KEY = "bulk-results"  # the last few runs' results, by batch
KEPT_RUNS = 5

WORDS = {
    "cancel": ("Cancel", "cancelled: what they wait for is withdrawn and no new effect starts"),
    "resume": ("Resume", "sent back to work at their current step (needs_attention), or where they were (paused)"),
    "retry": ("Retry now", "due now instead of at their backoff time (retry_pending only)"),
    "pause": ("Pause", "held where they are: a running step finishes and checkpoints, nothing after it runs"),
}


def operators_only(view):
    """Anonymous: to the login page; signed in without the operators' permission: 403."""
    return login_required(permission_required(OPERATE, raise_exception=True)(view))


def _filters(request: HttpRequest) -> tuple[dict[str, str], bool]:
    """The list's filters from the query string, and whether they are usable (a bad
    value is a message and no dry run)."""
    raw = {name: request.GET.get(name) or None for name in FILTERS}
    try:
        parsed = inputs.parse(inputs.ListFilters, raw)
    except InvalidInput as exc:
        messages.error(request, exc.message)
        return dict.fromkeys(FILTERS, ""), False
    values = {name: getattr(parsed, name) or "" for name in FILTERS}
    try:
        selectors.filtered(**{name: value or None for name, value in values.items()})  # checks; runs no query
    except InvalidInput as exc:
        messages.error(request, f"Not a filter the list knows: {exc.reason}.")
        return values, False
    return values, True


@operators_only
@require_GET
def bulk_choose(request: HttpRequest) -> HttpResponse:
    """Choose the operation for the executions the list's filters select; with
    ``operation``, the dry run: what it would apply to, and the confirm form."""
    filters, usable = _filters(request)
    operation = request.GET.get("operation") or ""
    if operation and operation not in bulk.OPERATIONS:
        messages.error(request, f"Unknown operation {operation[:40]!r}: choose cancel, resume or retry.")
        operation = ""
    dry = None
    if operation and usable:
        dry = bulk.bulk_dry_run(user=request.user, operation=operation, filter=filters)
    return _render_choose(request, filters=filters, operation=operation, dry=dry)


def _render_choose(
    request: HttpRequest, *, filters: dict[str, str], operation: str, dry: bulk.DryRun | None, status: int = 200
) -> HttpResponse:
    chosen = {k: v for k, v in filters.items() if v}
    return render(
        request,
        "executions/bulk.html",
        {
            "filters": filters,
            "filter_pairs": list(filters.items()),
            "filter_words": ", ".join(f"{k} {v}" for k, v in chosen.items()) or "all executions",
            "list_url": reverse("console:list") + (f"?{urlencode(chosen)}" if chosen else ""),
            # A migration names its version and accepts blockers one execution at a time: the API and keel migrate.
            "operations": [(name, *WORDS[name]) for name in bulk.OPERATIONS if name in WORDS],
            "operation": operation,
            "verb": WORDS[operation][0] if operation else "",
            "dry": dry,
            "eligible_rows": [(ref, dry.notes.get(ref, "")) for ref in dry.eligible] if dry else [],
            "max_items": bulk.MAX_ITEMS,
            "statuses": Status.choices,
            "reasons": stuck.REASONS,
            "workflows": catalogue.names(),
        },
        status=status,
    )


@operators_only
@require_POST
def bulk_run(request: HttpRequest) -> HttpResponse:
    """Run the confirmed operation on exactly the posted ids (the dry run's eligible
    set), then show the results. A missing reason or a changed set re-renders the dry
    run of those ids with the message (422); nothing is done."""
    ids = request.POST.getlist("ids")
    operation = request.POST.get("operation", "")
    # The list's filters ride along as filter_<name>, apart from the run's own fields (its reason).
    filters = {name: request.POST.get(f"filter_{name}", "") for name in FILTERS}
    try:
        form = inputs.parse(
            BulkFormIn,
            {
                "operation": operation,
                "ids": ids,
                "reason": request.POST.get("reason", "").strip(),
                "token": request.POST.get("token", ""),
            },
        )
        run = bulk.bulk_run(
            user=request.user,
            operation=form.operation,
            ids=form.ids,
            reason=form.reason,
            token=form.token,
            require_token=True,
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
        if operation not in bulk.OPERATIONS or not ids:
            return redirect("console:bulk")
        try:
            dry = bulk.bulk_dry_run(user=request.user, operation=operation, ids=ids)
        except InvalidInput:  # the ids themselves are unusable: start again from the list
            return redirect("console:bulk")
        return _render_choose(request, filters=filters, operation=operation, dry=dry, status=422)
    kept = request.session.get(SESSION_KEY, {})
    kept[run.batch] = run.as_dict()
    request.session[SESSION_KEY] = dict(list(kept.items())[-KEPT_RUNS:])
    return redirect(f"{reverse('console:bulk_results')}?{urlencode({'batch': run.batch})}")


@operators_only
@require_GET
def bulk_results(request: HttpRequest) -> HttpResponse:
    """Each id's outcome of one run (kept in the operator's session for the last few runs;
    the operator audit keeps the acts for good)."""
    batch = (request.GET.get("batch") or "")[:40]
    run = request.session.get(SESSION_KEY, {}).get(batch)
    if run is None:
        messages.error(request, "No results of that bulk run in this session; the operator audit lists what it did.")
    results = run["results"] if run else []
    return render(
        request,
        "executions/bulk_results.html",
        {
            "run": run,
            "batch": batch if run else "",
            "verb": WORDS[run["operation"]][0] if run else "",
            "results": results,
            "counts": {o: sum(1 for r in results if r["outcome"] == o) for o in ("done", "skipped", "error")},
        },
        status=200 if run else 404,
    )
