"""The seed workflow: a manager asks for the monthly performance report.

retrieve figures → analyze (verified facts + a model's narrative) → draft the report
(artifact, Markdown) → a manager approves that exact version → publish it through the
ledger (key ``<run>:publish:v<version>``) → notify management → completed.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from pydantic import Field, field_validator

from approvals.gate import Approval, ApproverPolicy
from executions.authoring import Effect, InvalidInput, RetryPolicy, Workflow, WorkflowInput, register

from . import retail, services_client


class MonthlyReportInput(WorkflowInput):
    month: str = Field(examples=["2026-08"], description="YYYY-MM, a month of the retail snapshot")

    @field_validator("month", mode="before")
    @classmethod
    def _in_the_snapshot(cls, value: Any) -> str:
        try:
            retail.month_figures(value)  # the snapshot decides which months exist
        except retail.UnknownMonth as exc:
            raise InvalidInput("input.month", str(exc)) from None
        return value


def month_before(fired_at) -> dict:
    """A schedule's firing → the month before it ("on the 1st, last month's report")."""
    year, month = (fired_at.year, fired_at.month - 1) if fired_at.month > 1 else (fired_at.year - 1, 12)
    return {"month": f"{year:04d}-{month:02d}"}


flow = register(
    Workflow(
        name="monthly_report",
        version=1,
        title="Monthly performance report",
        input=MonthlyReportInput,
        description="The month's figures from the retail snapshot, analysed and drafted as a report; a manager approves that exact version before it is published.",
        goal=lambda data: (
            f"Analyze {retail.month_label(data['month'])} business performance, prepare a report, "
            "and publish it to the management team after a manager approves it."
        ),
        deadline_seconds=30 * 24 * 3600,  # a monthly report older than a month is moot
        constraints=lambda data: [
            f"Use only figures from {retail.SNAPSHOT_ID}; never estimate or invent numbers.",
            "Publish only the exact report version a manager approved.",
        ],
        scheduled_input=month_before,
    )
)


@flow.step("retrieve_figures", label="Retrieving the month's figures")
def retrieve_figures(ctx) -> dict[str, Any]:
    figures = retail.month_figures(ctx.input["month"])
    ctx.add_facts(retail.verified_facts(figures))  # read from the snapshot: verified, with their sources
    return {"snapshot_id": retail.SNAPSHOT_ID, "figures": figures}


@flow.model_step("analyze", label="Analyzing performance", prompt_version="monthly-analysis-v1")
def analyze(ctx, model) -> dict[str, Any]:
    """The narrative, from the notes: every constraint (a manager's requested change
    included, when this runs again) and every fact verified so far."""
    facts = [f for f in ctx.notes["facts"] if f["source"].startswith(f"{retail.SNAPSHOT_ID}:")]
    prompt = ctx.prompt("Write a short summary of the month for the management team. Cite only the verified facts.")
    response = model.complete(prompt=prompt, prompt_version="monthly-analysis-v1", prompt_id="monthly-analysis")
    ctx.add_hypothesis(response.text, source=model.keys[-1])
    return {"facts": facts, "narrative": response.text, "model": response.model, "model_label": model.label}


@flow.step("draft_report", label="Drafting the report")
def draft_report(ctx) -> dict[str, Any]:
    analysis = ctx.state["analyze"]
    version = ctx.next_version("report")
    markdown = retail.render_report(
        month=ctx.input["month"],
        figures=ctx.state["retrieve_figures"]["figures"],
        facts=analysis["facts"],
        narrative=analysis["narrative"],
        # The report says what it honoured: the runtime's constraints, then what the requester asked.
        constraints=[*ctx.notes["constraints"], *ctx.notes.get("requested", [])],
        version=version,
        model_label=analysis["model_label"],
    )
    ctx.save_artifact(
        "report",
        kind="report",
        title=f"Monthly performance report — {retail.month_label(ctx.input['month'])}",
        content=markdown,
        content_type="text/markdown",
    )
    return {"report_version": version, "characters": len(markdown)}


flow.gate(
    "review",
    label="Awaiting manager approval",
    spec=Approval(
        artifact="report",
        action="publish_report",
        redraft_from="analyze",  # changes requested: the model writes the narrative again, with the comment
        approver=ApproverPolicy(
            permission="approvals.approve_publish_report",
            expires_after_seconds=settings.APPROVAL_TTL_SECONDS,
            on_expiry="needs_attention",  # an operator decides whether to ask again
        ),
    ),
)


# Transient failures and lost answers are retried (a lost answer is looked up by key
# first); four attempts with about 1 s, 2 s, 4 s between them.
EFFECT_RETRY = RetryPolicy(max_attempts=4, initial_backoff_seconds=1, max_backoff_seconds=60)


@flow.effect(
    "publish",
    label="Publishing the approved report",
    action="publish_report",
    guarded_by="review",
    retry=EFFECT_RETRY,
)
def publish(ctx) -> Effect:
    report = ctx.artifact("report")
    return Effect(
        key=f"{ctx.ref}:publish:v{report['version']}",
        args={
            "artifact_id": report["artifact_id"],
            "version": report["version"],
            "sha256": report["sha256"],
            "title": f"Monthly performance report — {retail.month_label(ctx.input['month'])}",
            "content": ctx.artifact_content("report").decode(),
            "audience": "management",
        },
        call=services_client.publish_report,
        lookup=services_client.find_publication,
    )


@flow.effect("notify", label="Notifying the management team", action="notify_management", retry=EFFECT_RETRY)
def notify(ctx) -> Effect:
    report = ctx.artifact("report")
    publication = ctx.state["publish"]
    return Effect(
        key=f"{ctx.ref}:notify:v{report['version']}",
        args={
            "channel": "email",
            "to": ["management@example.com"],
            "subject": f"Published: monthly performance report {ctx.input['month']} (V{report['version']})",
            "body": f"Publication {publication.get('publication_id')} is available ({report['artifact_id']} V{report['version']}).",
        },
        call=services_client.notify,
        lookup=services_client.find_notification,
    )


@flow.compensation("publish_report")
def retract_publication(args: dict[str, Any], receipt: dict[str, Any]) -> dict[str, Any]:
    """If a cancel comes after publishing, what undoing it would take (recorded, not run)."""
    return {
        "operation": "retract_publication",
        "publication_id": receipt.get("publication_id"),
        "artifact_id": args.get("artifact_id"),
        "version": args.get("version"),
    }
