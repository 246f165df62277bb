"""The start forms (one per workflow, drawn from its input schema) and the workflows page
(docs/design.md §6, "Platform"). Thin: the form is ``console.start_forms``, the catalogue is
``executions.catalogue``, the start is the service the API calls."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from executions import catalogue, inputs, services
from executions.errors import InvalidInput, NotFound, ServiceError

from . import start_forms


def _item_or_404(name: str) -> dict:
    try:
        return catalogue.item(name)
    except NotFound as exc:
        raise Http404(exc.message) from None


# The optional cost budget (docs/design.md §6, "Agents and children"), beside the workflow's own
# fields under a name no input field can take.
BUDGET = "_budget_usd"
# The version to start, when more than one is registered (default: the latest).
VERSION = "_version"


def _render(
    request, item, drawn, *, key: str, error: str = "", status: int = 200, budget: str = "", budget_error: str = ""
) -> HttpResponse:
    context = {
        "workflow": item,
        "fields": drawn,
        "idempotency_key": key,
        "error": error,
        "budget": budget,
        "budget_error": budget_error,
    }
    return render(request, "workflows/start.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def start_form(request: HttpRequest, workflow: str) -> HttpResponse:
    """GET: the form, with a new hidden idempotency key (a double submit or a reload and
    resubmit start one execution). POST: start it and redirect (303) to its page; a bad
    field draws the form again with the reason beside it (422)."""
    item = _item_or_404(workflow)
    drawn = start_forms.fields(item["input_schema"])
    if request.method == "GET":
        return _render(request, item, drawn, key=uuid.uuid4().hex)
    key = request.POST.get("idempotency_key", "").strip() or uuid.uuid4().hex
    data, errors = start_forms.read(drawn, request.POST)
    budget = request.POST.get(BUDGET, "").strip()
    budget_error = ""
    body = {"workflow": item["name"], "input": data, "idempotency_key": key}
    version = request.POST.get(VERSION, "").strip()
    if version and version != str(item["version"]):  # an older registered version, chosen
        body["version"] = int(version) if version.isdigit() else version  # the service names a bad one
    if budget:
        try:
            body["budget_usd"] = start_forms.number(budget)
        except ValueError:
            budget_error = "must be a number of US dollars (the digits 0-9 and a decimal point), e.g. 2.5"
    refused: list[tuple[str, str]] = []
    if not errors and not budget_error:
        try:
            start = inputs.parse(inputs.StartIn, body)
            execution, _ = services.execution_start(user=request.user, **start.model_dump())
        except InvalidInput as exc:
            refused = list(exc.errors)
        except ServiceError as exc:  # the same key with other input (409)
            return _render(
                request, item, drawn, key=uuid.uuid4().hex, error=exc.message, status=exc.status_code, budget=budget
            )
        else:
            return HttpResponseRedirect(reverse("console:detail", args=[execution.ref]), status=303)
    if errors or budget_error or any(field == "budget_usd" for field, _ in refused):
        # Every field's reason at once: a bad field or budget doesn't hide the input's own.
        checked = services.execution_input_refusals(workflow=item["name"], input=data)
        refused += [refusal for refusal in checked if refusal not in refused]
    beside, budget_refused, elsewhere = start_forms.place(refused, drawn, budget_field="budget_usd")
    for name, reason in beside.items():
        errors.setdefault(name, reason)
    for f in drawn:
        f.error = errors.get(f.name, "")
    return _render(
        request,
        item,
        drawn,
        key=key,
        error="; ".join(elsewhere) or "Check the fields marked below.",
        status=422,
        budget=budget,
        budget_error=budget_error or budget_refused,
    )


@login_required
@require_GET
def workflows_page(request: HttpRequest) -> HttpResponse:
    """Each workflow: its versions (how many executions are live on each, the share of new
    starts each gets, whether it can be retired), its steps, its input fields, a link to its
    start form."""
    rows = []
    for item in catalogue.items():
        rows.append(
            {
                **item,
                "fields": start_forms.fields(item["input_schema"]),
                "live": [_version_row(item, v) for v in item["by_version"]],
            }
        )
    return render(request, "workflows/list.html", {"workflows": rows})


def _version_row(item: dict, version: dict) -> dict:
    """One version as the page shows it: live executions, share of the new starts without a
    version (executions.rollouts), and whether it can be retired (neither)."""
    return {**version, "retirable": not version["live"] and not version["share"]}
