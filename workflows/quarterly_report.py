"""A parent workflow: the quarterly report, built from three monthly reports (docs/design.md §6).

start the quarter's three ``monthly_report`` children (each needs its own manager's
approval, as usual) and wait for them without a worker → draft the quarterly report
from their *published* figures (verified facts whose sources are the children's
report versions and publication receipts) → a manager approves that exact version →
publish it through the ledger (``publish_quarterly``) → notify management.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from pydantic import Field, field_validator

from approvals.gate import Approval, ApproverPolicy
from executions.authoring import Child, Effect, InvalidInput, RetryPolicy, Workflow, WorkflowInput, register

from . import retail, services_client


def quarter_months(quarter: str) -> list[str]:
    """``2026-Q3`` → ``["2026-07", "2026-08", "2026-09"]``; ValueError if malformed."""
    year, _, number = quarter.partition("-Q")
    if not (year.isdecimal() and len(year) == 4 and number in ("1", "2", "3", "4")):
        raise ValueError(quarter)
    first = 3 * (int(number) - 1) + 1
    return [f"{year}-{month:02d}" for month in range(first, first + 3)]


def available_quarters() -> list[str]:
    """The quarters whose three months are all in the snapshot (2026-Q1..Q3)."""
    months = set(retail.available_months())
    years = sorted({m[:4] for m in months})
    return [f"{y}-Q{n}" for y in years for n in (1, 2, 3, 4) if set(quarter_months(f"{y}-Q{n}")) <= months]


class QuarterlyReportInput(WorkflowInput):
    quarter: str = Field(examples=["2026-Q3"], description="YYYY-Qn, a quarter whose three months are in the snapshot")

    @field_validator("quarter", mode="before")
    @classmethod
    def _in_the_snapshot(cls, value: Any) -> str:
        known = available_quarters()
        if not isinstance(value, str) or value not in known:
            raise InvalidInput(
                "input.quarter", f"{value!r} is not a quarter of {retail.SNAPSHOT_ID}; one of {', '.join(known)}"
            )
        return value


def quarter_label(quarter: str) -> str:
    year, _, number = quarter.partition("-Q")
    return f"Q{number} {year}"


flow = register(
    Workflow(
        name="quarterly_report",
        version=1,
        title="Quarterly performance report",
        input=QuarterlyReportInput,
        goal=lambda data: (
            f"Prepare the {quarter_label(data['quarter'])} report from the three published monthly reports, "
            "and publish it to the management team after a manager approves it."
        ),
        deadline_seconds=90 * 24 * 3600,
        constraints=lambda data: [
            "Use only the figures the monthly reports published; never estimate or invent numbers.",
            "Publish only the exact report version a manager approved.",
        ],
    )
)


@flow.children("monthly_reports", label="Waiting for the three monthly reports")
def monthly_reports(ctx) -> list[Child]:
    asked = {"constraints": ctx.input["constraints"]} if ctx.input.get("constraints") else {}
    return [
        Child(workflow="monthly_report", input={"month": month, **asked}, key=month)
        for month in quarter_months(ctx.input["quarter"])
    ]


def _month_rows(ctx) -> list[dict[str, Any]]:
    """Each month as its published child says: figures, its report version, its receipt."""
    rows = []
    for month, child in sorted(ctx.state["monthly_reports"].items()):
        figures = child["state"]["retrieve_figures"]["figures"]
        report = child["artifacts"]["report"]
        rows.append(
            {
                "month": month,
                "label": retail.month_label(month),
                "execution": child["id"],
                "revenue": figures["revenue"],
                "transactions": figures["transactions"],
                "currency": figures.get("currency", "EUR"),
                "report": f"{report['artifact_id']} V{report['version']}",
                "sha256": report["sha256"],
                "publication_id": child["state"]["publish"].get("publication_id"),
            }
        )
    return rows


@flow.step("draft_quarterly", label="Drafting the quarterly report")
def draft_quarterly(ctx) -> dict[str, Any]:
    rows = _month_rows(ctx)
    label = quarter_label(ctx.input["quarter"])
    currency = rows[0]["currency"]
    revenue = sum(r["revenue"] for r in rows)
    transactions = sum(r["transactions"] for r in rows)
    # Verified: read from the children's published records (their artifacts and receipts).
    facts = [
        {
            "id": f"Q{n}",
            "statement": f"{r['label']} revenue was {r['revenue']} {currency} over {r['transactions']} transactions "
            f"(published as {r['publication_id']}).",
            "value": r["revenue"],
            "source": f"{r['execution']}:{r['report']}:{r['publication_id']}",
        }
        for n, r in enumerate(rows, start=1)
    ]
    facts.append(
        {
            "id": "Q4",
            "statement": f"{label} revenue was {revenue} {currency} over {transactions} transactions.",
            "value": revenue,
            "source": ", ".join(f"{r['execution']}:{r['publication_id']}" for r in rows),
        }
    )
    ctx.add_facts(facts)
    version = ctx.next_version("quarterly_report")
    lines = [
        f"# Quarterly performance report — {label} (V{version})",
        "",
        "| Month | Revenue | Transactions | Monthly report | Publication |",
        "|---|---:|---:|---|---|",
        *(
            f"| {r['label']} | {r['revenue']} {currency} | {r['transactions']} | {r['report']} | {r['publication_id']} |"
            for r in rows
        ),
        f"| **{label}** | **{revenue} {currency}** | **{transactions}** | | |",
        "",
        "## Verified facts",
        "",
        *(f"- {f['statement']} (source: {f['source']})" for f in facts),
        "",
        "## Constraints honoured",
        "",
        *(f"- {c}" for c in [*ctx.notes["constraints"], *ctx.notes.get("requested", [])]),
        "",
    ]
    ctx.save_artifact(
        "quarterly_report",
        kind="report",
        title=f"Quarterly performance report — {label}",
        content="\n".join(lines),
        content_type="text/markdown",
    )
    return {"report_version": version, "revenue": revenue, "transactions": transactions, "months": rows}


flow.gate(
    "review",
    label="Awaiting manager approval",
    spec=Approval(
        artifact="quarterly_report",
        action="publish_quarterly",
        approver=ApproverPolicy(
            permission="approvals.approve_publish_report",
            expires_after_seconds=settings.APPROVAL_TTL_SECONDS,
            on_expiry="needs_attention",
        ),
    ),
)

EFFECT_RETRY = RetryPolicy(max_attempts=4, initial_backoff_seconds=1, max_backoff_seconds=60)


@flow.effect(
    "publish",
    label="Publishing the approved quarterly report",
    action="publish_quarterly",
    guarded_by="review",
    retry=EFFECT_RETRY,
)
def publish(ctx) -> Effect:
    report = ctx.artifact("quarterly_report")
    return Effect(
        key=f"{ctx.ref}:publish:v{report['version']}",
        args={
            "artifact_id": report["artifact_id"],
            "version": report["version"],
            "sha256": report["sha256"],
            "title": f"Quarterly performance report — {quarter_label(ctx.input['quarter'])}",
            "content": ctx.artifact_content("quarterly_report").decode(),
            "audience": "management",
        },
        call=services_client.publish_report,
        lookup=services_client.find_publication,
    )


@flow.effect("notify", label="Notifying the management team", action="notify_management", retry=EFFECT_RETRY)
def notify(ctx) -> Effect:
    report = ctx.artifact("quarterly_report")
    publication = ctx.state["publish"]
    return Effect(
        key=f"{ctx.ref}:notify:v{report['version']}",
        args={
            "channel": "email",
            "to": ["management@example.com"],
            "subject": f"Published: quarterly performance report {ctx.input['quarter']} (V{report['version']})",
            "body": f"Publication {publication.get('publication_id')} is available ({report['artifact_id']} V{report['version']}).",
        },
        call=services_client.notify,
        lookup=services_client.find_notification,
    )


@flow.compensation("publish_quarterly")
def retract_publication(args: dict[str, Any], receipt: dict[str, Any]) -> dict[str, Any]:
    """If a cancel comes after publishing, what undoing it would take (recorded, not run)."""
    return {
        "operation": "retract_publication",
        "publication_id": receipt.get("publication_id"),
        "artifact_id": args.get("artifact_id"),
        "version": args.get("version"),
    }
