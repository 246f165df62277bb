"""Issue 17, items 5 and 7: a restart offers only steps that can work, says what it
would send again, refuses a repeat unless the operator accepts it with a reason, and
every act and every effect stays traceable to the decision that authorised it — on
the restarted execution's page, in the approval history and in the operator audit.

On real processes (the sandbox's faults drive each execution to ``failed``).
"""

from __future__ import annotations

import csv
import io

from django.db import transaction
from django.test import Client

from executions.engine import ledger
from executions.models import Action, Execution, ExecutionEvent
from tests.support.orders import add_fault
from tests.support.stack import approved, pk, up, wait_status


def operator_page(people) -> Client:
    client = Client()
    client.force_login(people["operator"].user)
    return client


def options_of(operator, ref: str) -> dict[str, dict]:
    answer = operator.get(f"/executions/{ref}/restart-options")
    assert answer.status_code == 200, answer.text
    return {o["step"]: o for o in answer.json()["options"]}


def in_flight_beside(ref: str) -> None:
    """A notification of ``ref`` caught mid-send (``executing``), as the notifications
    sweep leaves it for a moment right after a failure: CI once restarted in that moment."""
    execution = Execution.objects.get(pk=pk(ref))
    with transaction.atomic():
        action, _ = ledger.record_beside(
            execution,
            key=f"{ref}:notify:test-in-flight",
            action_type="email",
            args={},
            honors_key=False,
            actor_label="test",
        )
        action.begin()
        action.save(update_fields=["status", "updated_at"])


def test_a_replacement_order_restarts_only_from_a_step_that_proposes_again(stack, people, api_as):
    """Restarting from submit_order (where it failed) would reuse a proposal that carries
    the old execution's reference: refused, and not offered; the default re-proposes."""
    up(stack)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    started = requester.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1001"}})
    ref = started.json()["id"]
    add_fault(stack, endpoint="/orders", fault="error_400")
    approved(api_as, people, ref)
    wait_status(operator, ref, "failed")

    options = options_of(operator, ref)
    assert [s for s, o in options.items() if o["works"]] == ["load_order", "propose_replacement"]
    assert options["propose_replacement"]["default"] is True
    assert "propose_replacement" in options["submit_order"]["why_not"] and not options["review"]["works"]
    refused = operator.post(f"/executions/{ref}/restart", {"from_step": "submit_order", "reason": "try again"})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "from_step"]
    assert "propose_replacement or earlier" in refused.json()["detail"][0]["msg"]
    assert Execution.objects.count() == 1

    page = operator_page(people).get(f"/executions/{ref}/").content.decode()
    form = page[page.index('id="restart-form"') : page.index("</form>", page.index('id="restart-form"'))]
    assert '<option value="propose_replacement" selected>' in form and 'value="submit_order"' not in form
    assert "Not from “Submitting the approved replacement order”" in page

    restarted = operator.post(
        f"/executions/{ref}/restart", {"from_step": "propose_replacement", "reason": "the 400 was our data"}
    )
    assert restarted.status_code == 201, restarted.text
    new_ref = restarted.json()["id"]
    approved(api_as, people, new_ref)  # the new proposal, with the new reference, needs its own decision
    waiting = wait_status(operator, new_ref, "waiting")
    assert waiting["stuck"] is None
    assert stack.sandbox_stats()["keys"][f"{new_ref}:submit_order:v1"]["effects"] == 1


def test_a_report_restart_that_would_publish_again_is_refused_unless_accepted(stack, people, api_as):
    """notify failed after publish succeeded: restarting from publish would publish a
    second time on the old approval. Offered with the warning, refused (409) unless
    accepted; the default, notify, repeats nothing."""
    up(stack)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    ref = requester.start("2026-06")["id"]
    add_fault(stack, endpoint="/notify", fault="error_400")
    approved(api_as, people, ref)
    wait_status(operator, ref, "failed")
    publish = f"{ref}:publish:v1"

    options = options_of(operator, ref)
    assert options["notify"]["default"] is True and options["notify"]["would_repeat"] == []
    assert [r["key"] for r in options["publish"]["would_repeat"]] == [publish]
    assert [r["key"] for r in options["review"]["would_repeat"]] == [publish]
    in_flight_beside(ref)  # the e-mail telling of this failure, mid-send: it holds nothing up
    body = {"from_step": "publish", "reason": "try everything again"}
    refused = operator.post(f"/executions/{ref}/restart", body)
    assert refused.status_code == 409 and refused.json()["would_repeat"] == [publish], refused.text
    assert Execution.objects.count() == 1

    page = operator_page(people).get(f"/executions/{ref}/").content.decode()
    assert '<option value="notify" selected>' in page and 'id="accept-repeats"' in page
    assert f'sends again <code class="key">{publish} (it succeeded' in page

    restarted = operator.post(f"/executions/{ref}/restart", {"from_step": "notify", "reason": "the mail sink is back"})
    assert restarted.status_code == 201, restarted.text
    new_ref = restarted.json()["id"]
    wait_status(operator, new_ref, "completed")
    keys = stack.sandbox_stats()["keys"]
    assert keys[publish]["effects"] == 1 and f"{new_ref}:publish:v1" not in keys, "published once, ever"


def test_a_restart_that_publishes_names_the_approval_it_acts_on_everywhere(stack, people, api_as):
    """A report whose publish failed for good, restarted from publish: the new execution
    publishes under the failed one's approval. Its ledger row and its approvals panel
    say so, the approval history shows the publication's outcome (not the failed
    attempt's alone), and the operator audit and its CSV list the restart."""
    up(stack)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    ref = requester.start("2026-07")["id"]
    add_fault(stack, endpoint="/reports/publish", fault="error_500", count=20)
    approved(api_as, people, ref)
    wait_status(operator, ref, "failed", timeout=90)
    stack_faults_clear(stack)
    approval = Action.objects.get(key=f"{ref}:publish:v1").gate_ref
    restarted = operator.post(f"/executions/{ref}/restart", {"from_step": "publish", "reason": "the portal is back"})
    new_ref = restarted.json()["id"]
    wait_status(operator, new_ref, "completed")

    published = Action.objects.get(key=f"{new_ref}:publish:v1")
    assert published.gate_ref == approval, "the effect names what authorised it"
    client = operator_page(people)
    page = client.get(f"/executions/{new_ref}/").content.decode()
    approvals = page[page.index('id="approvals-card"') : page.index('id="steps-card"')]
    assert "None requested yet" not in approvals and 'class="reused-approval"' in approvals
    assert f'requested in <a href="/executions/{ref}/">{ref}</a>' in approvals
    number = approval.removeprefix("approval:")
    assert f"authorised by approval #{number} in {ref}: V1" in page

    auditor = Client()
    auditor.force_login(people["auditor"].user)
    history = auditor.get("/approvals/audit/").content.decode()
    row = history[history.index(f'data-approval="{number}"') :]
    row = row[: row.index("</tr>")]
    assert f"succeeded in {new_ref} (a restart, reusing this decision)" in row and "failed" in row

    acts = operator.get(f"/operator-audit?execution={ref}").json()["items"]
    [act] = [a for a in acts if a["action"] == "restart"]
    assert act["actor"] == "operator" and act["reason"] == "the portal is back"
    assert act["before"] == "failed" and act["after"] == f"restarted as {new_ref}" and act["subject"] == "publish"
    exported = client.get("/operator-audit/export.csv?action=restart").content.decode()
    [header, line] = list(csv.reader(io.StringIO(exported)))
    assert ref in line and "restart" in line and "the portal is back" in line, (header, line)
    assert ExecutionEvent.objects.filter(execution_id=pk(ref), type="execution.restarted").count() == 1


def stack_faults_clear(stack) -> None:
    from tests.support.procs import http

    assert http().delete(f"{stack.sandbox_url}/_faults", timeout=5).status_code == 200
