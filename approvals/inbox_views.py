"""The managers' inbox and the approval page. Thin: reads through ``approvals.selectors``.

Deciding is not here: the approval page's form posts to ``executions:decide``
(``approvals.views.decide``) with ``then=inbox``, so the manager lands on the next item.

Rendering never writes the audit. A "viewed" entry is recorded only by ``approval_viewed``,
a POST (CSRF-checked) that the approval card of a page a person opened sends once it is
shown: an ``<img>`` or any other GET of a page — a same-origin image in a report,
a prefetch — records nothing.
"""

from __future__ import annotations

import re
import uuid

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from artifacts.rendering import render_artifact, version_diff

from . import audit, outcomes, policy, selectors
from .audit_views import VIEW_AUDIT
from .models import AuditEntry


@login_required
@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    items = selectors.inbox_for(request.user)
    return render(request, "approvals/inbox.html", {"items": items})


@login_required
@require_GET
def inbox_count(request: HttpRequest) -> HttpResponse:
    """The nav link's "(n)", loaded by htmx after the page."""
    return render(request, "approvals/inbox.html#inbox_count", {"count": selectors.inbox_count(request.user)})


@login_required
@require_GET
def approval_detail(request: HttpRequest, pk: int) -> HttpResponse:
    approval = selectors.approval_for(pk)
    if approval is None:
        raise Http404(f"no approval request {pk}")
    refusal = policy.refusal(request.user, approval)
    is_open = selectors.is_open(approval)
    show_form = refusal is None and is_open
    event_id = uuid.uuid4().hex if show_form else ""
    version = approval.artifact_version
    decision = selectors.decision_of(approval)
    after = outcomes.after_request(approval, window=selectors.event_window(approval))
    context = {
        "approval": approval,
        "execution": approval.execution,
        "version": version,
        "decision": decision,
        "effects": after.effects if decision else [],
        # Who was told (addresses, receivers): for those who decide such requests and auditors.
        "told": after.told if refusal is None or request.user.has_perm(VIEW_AUDIT) else None,
        "diff": version_diff(version),
        "earlier": selectors.earlier_decisions(approval),
        "agent_reads": selectors.agent_reads(approval),
        "artifact_html": render_artifact(version),
        "refusal": refusal,
        "is_open": is_open,
        "closed_why": "" if is_open else selectors.not_open_because(approval),
        "reject_continues_at": selectors.reject_continues_at(approval) if show_form else "",
        "show_form": show_form,
        "expires_soon": selectors.expires_soon(approval),
        "event_id": event_id,
        "record_view": refusal is None,  # the card, once shown, says it was seen (approval_viewed)
        "third_party_messages": selectors.third_party_messages(approval),
    }
    return render(request, "approvals/detail.html", context)


VIEWED_FROM = ("approval page", "execution page")


@login_required
@require_POST
def approval_viewed(request: HttpRequest, pk: int) -> HttpResponse:
    """The approval card a person opened was shown: record who saw which version and hash,
    with the form token that ties a later decision to this view (``form_token``, the
    32 hex characters of the card's decide form, or none) and where (``via``). 204;
    nothing is recorded for a user who may not decide it."""
    approval = selectors.approval_for(pk)
    if approval is None:
        raise Http404(f"no approval request {pk}")
    token = request.POST.get("form_token", "")
    via = request.POST.get("via", VIEWED_FROM[0])
    if (token and not re.fullmatch(r"[0-9a-f]{32}", token)) or via not in VIEWED_FROM:
        return HttpResponse("form_token must be 32 hex characters and via one of " + ", ".join(VIEWED_FROM), status=422)
    if policy.refusal(request.user, approval) is None:
        audit.record(
            AuditEntry.Kind.VIEWED,
            request=approval,
            actor=request.user,
            artifact_version=approval.version,
            content_sha256=approval.content_sha256,
            status=approval.status,
            **({"form_token": token} if token else {}),
            **({"via": via} if via != VIEWED_FROM[0] else {}),
        )
    return HttpResponse(status=204)


@login_required
@require_GET
def approval_state(request: HttpRequest, pk: int) -> HttpResponse:
    """The approval page's live status (polled while the request is pending)."""
    approval = selectors.approval_for(pk)
    if approval is None:
        raise Http404(f"no approval request {pk}")
    is_open = selectors.is_open(approval)
    context = {
        "approval": approval,
        "execution": approval.execution,
        "is_open": is_open,
        "closed_why": "" if is_open else selectors.not_open_because(approval),
    }
    return render(request, "approvals/detail.html#approval_state", context)
