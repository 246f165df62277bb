"""A refused operator form comes back with what was typed, beside the message: the
execution page's signal form, refused for its JSON, the waiting step's schema or a
missing reason, is the page again (422) with the payload and the reason filled in and
nothing written. Only that answer is filled in: the next look at the page, the
operator's or anyone's, and a successful send start from an empty form. In process
(Django's test client on PostgreSQL; the steps run here, ``runner.advance``)."""

from __future__ import annotations

import pytest
from django.utils.html import escape

import tests.support.migrating_flow  # noqa: F401 - registers "migrating": v1 waits for "go" (no payload)
from executions import services
from executions.engine import runner
from executions.models import Execution, ExecutionEvent, Status, Wait
from tests.support.screens import logged_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiting(people) -> Execution:
    """An execution of ``migrating`` v1 waiting at ``hold`` for the signal ``go``."""
    execution, _ = services.execution_start(user=people["requester"].user, workflow="migrating", input={}, version=1)
    for _ in range(20):
        if runner.advance(execution.pk, worker="worker:test-refused-forms") != "sliced":
            break
    execution.refresh_from_db()
    assert (execution.status, execution.current_step) == (Status.WAITING, "hold"), execution.status_reason
    return execution


def signal_form(page: str) -> str:
    start = page.index('id="signal-form"')
    return page[start : page.index("</form>", start)]


def signal_error(form: str) -> str:
    start = form.index('id="signal-error">') + len('id="signal-error">')
    return form[start : form.index("</p>", start)]


def record(execution: Execution) -> tuple:
    """What a delivered signal would change: the execution, its wait, its history."""
    execution.refresh_from_db()
    wait = Wait.objects.get(execution=execution, step="hold")
    return execution.status, wait.status, ExecutionEvent.objects.filter(execution=execution).count()


@pytest.mark.parametrize(
    ("payload", "reason", "refusal"),
    [
        ('{"tracking": "TRK-1",', "the warehouse phoned: it's <shipped>", "not valid JSON"),
        ('{"tracking": "TRK-1"}', "the warehouse phoned", "the signal go takes no payload"),
        ('{"tracking": "TRK-1"}', "", "reason: String should have at least 1 character"),
    ],
    ids=["bad-json", "refused-by-the-schema", "no-reason"],
)
def test_a_refused_signal_comes_back_with_the_payload_and_reason_typed(people, waiting, payload, reason, refusal):
    operator = logged_in(people["operator"])
    before = record(waiting)

    refused = operator.post(
        f"/executions/{waiting.ref}/signal/",
        {"name": "go", "event_id": "go-refused-1", "payload": payload, "reason": reason},
    )

    assert refused.status_code == 422
    form = signal_form(refused.content.decode())
    assert refusal in signal_error(form)
    assert f'<textarea name="payload" rows="2">{escape(payload)}</textarea>' in form
    assert f'<input name="reason" required value="{escape(reason)}">' in form
    assert record(waiting) == before, "a refused signal writes nothing"


def test_only_the_refused_answer_is_filled_in_and_a_successful_send_is_not(people, waiting):
    operator = logged_in(people["operator"])
    typed = {"name": "go", "payload": "{nope", "reason": "the warehouse phoned"}
    assert operator.post(f"/executions/{waiting.ref}/signal/", {**typed, "event_id": "go-1"}).status_code == 422

    for who in ("operator", "requester"):  # the next look, the operator's or the starter's: an empty form
        form = signal_form(logged_in(people[who]).get(f"/executions/{waiting.ref}/").content.decode())
        assert "{nope" not in form and "the warehouse phoned" not in form and 'id="signal-error"' not in form, who

    sent = operator.post(
        f"/executions/{waiting.ref}/signal/",
        {**typed, "payload": "", "event_id": "go-2"},
        follow=True,
    )
    page = sent.content.decode()
    assert sent.redirect_chain == [(f"/executions/{waiting.ref}/", 302)]
    assert f"Sent the signal; {waiting.ref} is" in page
    assert "{nope" not in page and 'id="signal-error"' not in page
    assert Wait.objects.get(execution=waiting, step="hold").status != Wait.State.WAITING


def test_a_refused_signal_with_no_form_on_the_page_says_why_in_the_messages(people, waiting):
    """Someone the page draws no signal form for still hears why it was refused."""
    refused = logged_in(people["outsider"]).post(
        f"/executions/{waiting.ref}/signal/",
        {"name": "go", "event_id": "go-3", "payload": "{nope", "reason": "just because"},
    )
    page = refused.content.decode()
    assert refused.status_code == 422 and 'id="signal-form"' not in page
    messages = page[page.index('id="messages"') : page.index("</div>", page.index('id="messages"'))]
    assert "not valid JSON" in messages
    assert Wait.objects.get(execution=waiting, step="hold").status == Wait.State.WAITING
