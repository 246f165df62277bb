"""Outbound webhooks (docs/design.md §6): the body, its signature, and the POST.

``{"event", "execution": {"id", "workflow", "status", "stuck"}, "sent_at"}`` as JSON (and,
for ``approval.requested``, ``"approval": {"id", "artifact_id", "artifact_version",
"content_sha256", "action", "url"}``),
signed ``X-Keel-Signature: sha256=<hex HMAC-SHA256 of the exact body bytes with
KEEL_WEBHOOK_SECRET>``, with the ledger key as ``Idempotency-Key``. The event's facts
are fixed when it is planned (stored on the action); ``sent_at`` is each attempt's,
so the signature covers the bytes actually sent.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from executions import selectors
from executions.authoring.http import post_bytes
from executions.errors import FailureKind, StepFailure
from executions.models import Execution, Status
from executions.redaction import redact_text

from . import channels, links

OFF = "webhooks are off here now (KEEL_WEBHOOK_URL is not set)"

EVENTS = (
    "approval.requested",
    "input.requested",
    "execution.needs_attention",
    "execution.failed",
    "execution.completed",
)


def describe(execution: Execution, *, event: str, status: str, approval: Any = None) -> dict[str, Any]:
    """The event's facts as the action's arguments (the status it reports, the stuck
    reason as the triage console reads it then; for ``approval.requested``, which request
    — ``approval``: its id, the exact version and sha256 to decide, the action it allows
    and the page to decide it on), and where it goes as a reader may see it: a hook URL's
    credential path is not stored (``settings.SECRETS``); it is sent to the URL
    configured when it goes."""
    annotated = selectors.execution(execution.pk)
    stuck = selectors.triage_fields(annotated)["stuck"] if annotated is not None else None
    facts = {
        "event": event,
        "execution": {"id": execution.ref, "workflow": execution.workflow, "status": status, "stuck": stuck},
    }
    if status == Status.COMPLETED:  # what it produced (Workflow.result)
        facts["execution"]["result"] = (execution.context or {}).get("result")
    if approval is not None:  # what a person in the chat room decides, and where
        facts["approval"] = {
            "id": approval.pk,
            "artifact_id": approval.artifact_version.artifact.ref,
            "artifact_version": approval.version,
            "content_sha256": approval.content_sha256,
            "action": approval.action,
            "url": links.approval(approval.pk),
        }
    return {"url": redact_text(settings.KEEL_WEBHOOK_URL), "body": json.loads(json.dumps(facts, cls=DjangoJSONEncoder))}


def signature(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def send(args: dict[str, Any], key: str) -> dict[str, Any]:
    """POST the event; 2xx → the receipt; failures sorted by ``executions.authoring.http``
    (4xx and redirects refused for good — never followed —, 5xx, timeouts and an answer
    over its size limit worth another attempt with the same key)."""
    body = json.dumps({**args["body"], "sent_at": timezone.now().isoformat()}, separators=(",", ":")).encode()
    url = settings.KEEL_WEBHOOK_URL  # where it goes now, if that was changed since
    if not url:  # unset since it was planned (an unknown outcome is sent again without asking still_wanted)
        raise StepFailure(FailureKind.INVALID_INPUT, OFF)
    answer = post_bytes(url, body, key=key, headers={"X-Keel-Signature": signature(body, settings.KEEL_WEBHOOK_SECRET)})
    return {"url": url, "answer": answer}  # redacted as every receipt is, by the ledger


def still_wanted(_delivery) -> str | None:
    """A webhook planned while KEEL_WEBHOOK_URL was set does not go once it is unset."""
    return None if settings.KEEL_WEBHOOK_URL else OFF


# A receiver de-duplicates on the Idempotency-Key: a lost answer is sent again with the same key.
WEBHOOK = channels.register(
    channels.Channel(name="webhook", action_type="webhook", honors_key=True, send=send, still_wanted=still_wanted)
)
