"""The e-mails: what each says, and sending one through Django's e-mail framework.

A message is composed when it is planned and stored on its action (``args``): every
attempt sends the same bytes with the same ``Message-ID`` (derived from the ledger
key, so a mailbox that de-duplicates by Message-ID shows one). Plain text and HTML;
the HTML is rendered by a template (auto-escaped) and then sanitised like every page
that shows outside text (``artifacts.sanitize``).

SMTP has no idempotency key and no lookup, so the failures are sorted by whether the
message can have left: refused before DATA (could not connect, recipient or sender
refused) → not sent; the connection lost or timed out after the message was handed
over → the outcome is unknown, and the ledger never sends it again on its own.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import smtplib
from email.utils import parseaddr
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.template.loader import render_to_string

from approvals.models import ApprovalRequest
from artifacts.models import ArtifactVersion
from artifacts.sanitize import sanitize_html
from executions.errors import FailureKind, StepFailure
from executions.models import Question

from . import channels, links, recipients

SUBJECTS = {
    "opened": "[keel] {ref}: {action} of {artifact} V{version} awaits your decision",
    "reminder": "[keel] Reminder: {ref}: {action} of {artifact} V{version} still awaits a decision",
    "approval_overdue": "[keel] Overdue: {ref}: {action} of {artifact} V{version} passed its SLA undecided",
    "superseded": "[keel] {ref}: V{version} of {artifact} was replaced by V{newer}",
    "remind": "[keel] {asked_by} asks you to decide: {ref}: {action} of {artifact} V{version}",
    "input.requested": "[keel] {ref}: {tool} asks for your answer",
}


def compose(
    request: ApprovalRequest,
    *,
    kind: str,
    to: str,
    key: str,
    may_decide: bool = True,
    asked_by: str = "",
    note: str = "",
) -> dict[str, Any]:
    """The message for ``kind`` about ``request``, as the action's arguments. ``may_decide``:
    the recipient may decide it (the decide link), else an operator told what they can do
    (remind the managers from the execution page, or escalate). ``asked_by`` and ``note``:
    the operator who sent a ``remind`` and why. The subject ends with what the execution is
    about (``(month 2026-08)``, from its input), the body says it too."""
    artifact = request.artifact_version.artifact
    newest = ArtifactVersion.objects.filter(artifact=artifact).order_by("-number").values_list("number", flat=True)
    about = request.execution.about  # executions.about: one short line, no control characters
    facts = {
        "kind": kind,
        "ref": request.execution.ref,
        "about": about,
        "workflow": request.execution.workflow,
        "approval_id": request.pk,
        "action": request.action,
        "artifact": artifact.ref,
        "version": request.version,
        "newer": newest.first(),
        "sha256": request.content_sha256,
        "link": links.approval(request.pk),
        "execution_link": links.execution(request.execution.ref),
        "account_link": links.account(),
        # as the pages write a time, to the second, in UTC (a person reads it)
        "expires_at": f"{request.expires_at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC" if request.expires_at else "",
        "may_decide": may_decide,
        "asked_by": asked_by,
        "note": note,
    }
    return {
        "to": to,
        "from": settings.DEFAULT_FROM_EMAIL,
        "subject": SUBJECTS[kind].format(**facts) + (f" ({about})" if about else ""),
        "text": render_to_string("notifications/email.txt", facts),
        "html": sanitize_html(render_to_string("notifications/email.html", facts)),
        "message_id": message_id(key),
        "approval_id": request.pk,
        "kind": kind,
    }


def compose_question(question: Question, *, to: str, key: str) -> dict[str, Any]:
    """The message telling the requester (or an operator) that a tool's provider asked a
    question mid-call (``pending_input``): what it asks, and the page that answers it."""
    execution = question.execution
    about = execution.about
    facts = {
        "kind": "input.requested",
        "ref": execution.ref,
        "about": about,
        "workflow": execution.workflow,
        "tool": question.tool,
        "message": question.message,
        "execution_link": links.execution(execution.ref),
        "account_link": links.account(),
    }
    return {
        "to": to,
        "from": settings.DEFAULT_FROM_EMAIL,
        "subject": SUBJECTS["input.requested"].format(**facts) + (f" ({about})" if about else ""),
        "text": render_to_string("notifications/question.txt", facts),
        "html": sanitize_html(render_to_string("notifications/question.html", facts)),
        "message_id": message_id(key),
        "question_id": question.pk,
        "kind": "input.requested",
    }


def message_id(key: str) -> str:
    domain = parseaddr(settings.DEFAULT_FROM_EMAIL)[1].rpartition("@")[2] or "keel.invalid"
    return f"<{hashlib.sha256(key.encode()).hexdigest()[:32]}@{domain}>"


def send(args: dict[str, Any], key: str) -> dict[str, Any]:
    """Hand one message to the configured backend; the receipt names its Message-ID.
    Raises StepFailure: transient (not sent), invalid_input / permission (refused for
    good), outcome_unknown (it may have been accepted)."""
    message = EmailMultiAlternatives(
        subject=args["subject"],
        body=args["text"],
        from_email=args["from"],
        to=[args["to"]],
        headers={"Message-ID": args["message_id"], "X-Keel-Notification": key},
    )
    message.attach_alternative(args["html"], "text/html")
    connection = get_connection(fail_silently=False)
    try:
        connection.open()
    except smtplib.SMTPAuthenticationError as exc:
        raise StepFailure(FailureKind.PERMISSION, f"the mail server refused the login: {exc.smtp_code}") from None
    except (OSError, smtplib.SMTPException) as exc:
        raise StepFailure(FailureKind.TRANSIENT, f"could not reach the mail server: {exc}") from None
    try:
        connection.send_messages([message])
    except smtplib.SMTPRecipientsRefused as exc:
        raise StepFailure(
            FailureKind.INVALID_INPUT, f"the mail server refused {args['to']}: {exc.recipients}"
        ) from None
    except smtplib.SMTPResponseException as exc:
        # An answer to the envelope or the DATA: the server said no, so it did not take it.
        kind = FailureKind.TRANSIENT if 400 <= exc.smtp_code < 500 else FailureKind.INVALID_INPUT
        raise StepFailure(kind, f"the mail server answered {exc.smtp_code}: {exc.smtp_error!r}") from None
    except (TimeoutError, OSError, smtplib.SMTPException) as exc:
        raise StepFailure(
            FailureKind.OUTCOME_UNKNOWN, f"the connection to the mail server was lost while sending: {exc}"
        ) from None
    finally:
        with contextlib.suppress(OSError, smtplib.SMTPException):
            connection.close()
    return {"message_id": args["message_id"], "to": args["to"], "backend": settings.EMAIL_BACKEND.rsplit(".", 2)[-2]}


def still_wanted(delivery) -> str | None:
    """Why this message should no longer go (None: it should). Decided or cancelled
    requests get nothing more; a superseded one only its "replaced" note; a person who
    turned e-mail off, or has no address, gets none."""
    if delivery.recipient is not None and (refused := recipients.wants_email(delivery.recipient)):
        return refused
    if delivery.kind == "input.requested":
        question = Question.objects.get(pk=delivery.action.args["question_id"])
        answered = question.status != Question.State.OPEN
        return f"the question {question.input_id} is {question.status}: nothing more is sent" if answered else None
    request = ApprovalRequest.objects.get(pk=delivery.request_id)
    wanted = ApprovalRequest.State.SUPERSEDED if delivery.kind == "superseded" else ApprovalRequest.State.PENDING
    if request.status != wanted:
        return f"approval {request.pk} is {request.status}: nothing more is sent about it"
    return None


# SMTP has no idempotency key: a lost answer leaves the message ``unknown``, never re-sent.
EMAIL = channels.register(
    channels.Channel(
        name="email", action_type="notify_approver", honors_key=False, send=send, still_wanted=still_wanted
    )
)
