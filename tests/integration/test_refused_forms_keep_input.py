"""A refused operator form comes back with what was typed, beside the message: on the
execution page, the signal form (refused for its JSON, the waiting step's schema or a
missing reason), the answer to a question (refused by its schema), the budget form (an
amount or reason refused), the pause and legal-hold forms, retry now, accepting a
drifted call's new request, restart from a step and the approval card's remind (a
reason refused), closing a compensation (its evidence) and the redraft (its
instruction) are the page again (422) with what was typed filled in and nothing
written. Only that response is filled in: the next look at the page, the operator's or
anyone's, and a successful send start from an empty form. In process (Django's test
client on PostgreSQL; the steps run here, ``runner.advance``)."""

from __future__ import annotations

import pytest
from django.utils.html import escape

import tests.support.migrating_flow  # noqa: F401 - registers "migrating": v1 waits for "go" (no payload)
from executions import questions, services
from executions.engine import runner
from executions.models import Action, Execution, ExecutionEvent, Question, Status, Wait
from tests.support.records import publish_action
from tests.support.rooms import WORDING  # registers "asking_room" and "flaky_room"
from tests.support.screens import logged_in
from triage import drift

pytestmark = pytest.mark.django_db(transaction=True)


def _advanced(execution: Execution, status: str = Status.WAITING) -> Execution:
    for _ in range(20):
        if runner.advance(execution.pk, worker="worker:test-refused-forms") != "sliced":
            break
    execution.refresh_from_db()
    assert execution.status == status, execution.status_reason
    return execution


def _started(people, workflow: str, status: str = Status.WAITING, **start) -> Execution:
    execution, _ = services.execution_start(user=people["requester"].user, workflow=workflow, input={}, **start)
    return _advanced(execution, status)


@pytest.fixture
def waiting(people) -> Execution:
    """An execution of ``migrating`` v1 waiting at ``hold`` for the signal ``go``."""
    execution = _started(people, "migrating", version=1)
    assert execution.current_step == "hold"
    return execution


@pytest.fixture
def asked(people, settings) -> tuple[Execution, Question]:
    """An execution of ``asking_room`` waiting for the answer to its question, with a
    budget of $1 (an operator may raise it; the offline model priced for it)."""
    settings.RUNTIME_MODEL_PRICES = {"offline-deterministic-1": {"input_per_mtok": 1, "output_per_mtok": 1}}
    execution = _started(people, "asking_room", budget_usd=1)
    return execution, Question.objects.get(execution=execution, status=Question.State.OPEN)


@pytest.fixture
def retrying(people) -> Execution:
    """An execution of ``flaky_room`` retry_pending: its next attempt is due in 15 minutes."""
    return _started(people, "flaky_room", Status.RETRY_PENDING)


@pytest.fixture
def drifted(people, asked, monkeypatch) -> Execution:
    """The ``asked`` execution stopped by a model drift: its instruction was edited before
    the answer, so the step rebuilt its first model call with another request."""
    execution, question = asked
    monkeypatch.setitem(WORDING, "verb", "Reserve")
    answer = {"confirm": True, "people": 2}
    questions.answer_deliver(
        ref=execution.ref, user=people["requester"].user, input_id=question.input_id, answer=answer, event_id="a-1"
    )
    return _advanced(execution, Status.NEEDS_ATTENTION)


def form_of(page: str, name: str, anchor: str = "") -> str:
    """The form ``name`` (``name-form``, or the one holding ``anchor``) as drawn."""
    start = page.rindex("<form", 0, page.index(anchor or f'id="{name}-form"'))
    return page[start : page.index("</form>", start)]


def error_of(page: str, name: str, anchor: str = "") -> str:
    """The message beside the form ``name`` (or the one holding ``anchor``): in it, or just before it."""
    start = page.index(f'id="{name}-error">') + len(f'id="{name}-error">')
    end = page.index("</p>", start)
    form = page.rindex("<form", 0, page.index(anchor or f'id="{name}-form"'))
    assert form < start < page.index("</form>", form) or not page[end + len("</p>") : form].strip(), name
    return page[start:end]


def record(execution: Execution) -> tuple:
    """What a delivered form would change: the execution (status, budget, hold, when it is
    due), its waits, questions and actions, its history."""
    execution.refresh_from_db()
    return (
        execution.status,
        execution.budget_usd,
        execution.hold_at,
        execution.due_at,
        sorted(Wait.objects.filter(execution=execution).values_list("status", flat=True)),
        sorted(Question.objects.filter(execution=execution).values_list("status", flat=True)),
        sorted(Action.objects.filter(execution=execution).values_list("status", flat=True)),
        ExecutionEvent.objects.filter(execution=execution).count(),
    )


# --- the signal form


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
    page = refused.content.decode()
    form = form_of(page, "signal")
    assert refusal in error_of(page, "signal")
    assert f'<textarea name="payload" rows="2">{escape(payload)}</textarea>' in form
    assert f'<input name="reason" required value="{escape(reason)}">' in form
    assert record(waiting) == before, "a refused signal writes nothing"


def test_only_the_refused_signal_is_filled_in_and_a_successful_send_redirects(people, waiting):
    operator = logged_in(people["operator"])
    typed = {"name": "go", "payload": "{nope", "reason": "the warehouse phoned"}
    assert operator.post(f"/executions/{waiting.ref}/signal/", {**typed, "event_id": "go-1"}).status_code == 422

    for who in ("operator", "requester"):  # the next look, the operator's or the starter's: an empty form
        form = form_of(logged_in(people[who]).get(f"/executions/{waiting.ref}/").content.decode(), "signal")
        assert "{nope" not in form and "the warehouse phoned" not in form and 'id="signal-error"' not in form, who

    sent = operator.post(
        f"/executions/{waiting.ref}/signal/",
        {**typed, "payload": "", "event_id": "go-2"},
        follow=True,
    )
    page = sent.content.decode()
    assert sent.redirect_chain == [(f"/executions/{waiting.ref}/", 302)]
    assert f"Sent the signal; {waiting.ref} is" in page  # (the form is gone: nothing is waiting)
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


# --- the answer to a question


NOTE = 'the projector & "HDMI" <please>'


@pytest.mark.parametrize(
    ("people_typed", "note", "refusal"),
    [("40", NOTE, "answer.people"), ("10", NOTE + " and the whiteboard markers, all four", "answer.note")],
    ids=["too-many-people", "note-too-long"],
)
def test_a_refused_answer_comes_back_with_what_was_typed(people, asked, people_typed, note, refusal):
    execution, question = asked
    operator = logged_in(people["operator"])
    before = record(execution)

    refused = operator.post(
        f"/executions/{execution.ref}/answer/",
        {
            "input_id": question.input_id,
            "event_id": "answer-refused-1",
            "answer.confirm": "yes",
            "answer.people": people_typed,
            "answer.note": note,
        },
    )

    assert refused.status_code == 422
    page = refused.content.decode()
    form = form_of(page, "answer")
    assert refusal in error_of(page, "answer")
    assert '<option value="yes" selected>yes</option>' in form and "— choose —" in form
    assert f'name="answer.people" value="{people_typed}" required>' in form
    assert f'<input name="answer.note" value="{escape(note)}" maxlength="2000">' in form
    assert record(execution) == before, "a refused answer writes nothing"


def test_only_the_refused_answer_to_a_question_is_filled_in_and_a_good_one_is_recorded(people, asked):
    execution, question = asked
    operator = logged_in(people["operator"])
    typed = {"input_id": question.input_id, "answer.confirm": "yes", "answer.note": NOTE}
    refused = operator.post(
        f"/executions/{execution.ref}/answer/", {**typed, "answer.people": "40", "event_id": "answer-1"}
    )
    assert refused.status_code == 422

    for who in ("operator", "requester"):  # the next look: the question's form as it first was
        form = form_of(logged_in(people[who]).get(f"/executions/{execution.ref}/").content.decode(), "answer")
        assert escape(NOTE) not in form and 'value="40"' not in form and 'id="answer-error"' not in form, who
        assert " selected>yes" not in form, who

    answered = operator.post(
        f"/executions/{execution.ref}/answer/",
        {**typed, "answer.people": "10", "event_id": "answer-2"},
        follow=True,
    )
    page = answered.content.decode()
    assert answered.redirect_chain == [(f"/executions/{execution.ref}/", 302)]
    assert f"Answered; {execution.ref} is" in page  # (the form is gone: nothing is asked)
    question.refresh_from_db()
    assert question.status == Question.State.ANSWERED
    assert question.answer == {"confirm": True, "people": 10, "note": NOTE}


# --- the budget form

EMPTY_BUDGET = ('autocomplete="off"></label>', '<input name="reason" required maxlength="2000"></label>')


@pytest.mark.parametrize(
    ("amount", "reason", "refusal"),
    [
        ("lots", 'the ticket is <long> & "hard"', "add_usd: must be a number"),
        ("2e9", "the ticket is long", "add_usd: must be at most"),
        ("0.5", "   ", "reason: say why the budget is raised"),
        ("0.5", "the ticket <is> " + "y" * 2000, "reason: String should have at most 2000"),
        ("0.5", "the ticket\x00", "reason: must not contain NUL"),
    ],
    ids=["not-a-number", "too-much", "no-reason", "reason-too-long", "reason-not-storable"],
)
def test_a_refused_budget_raise_comes_back_with_the_amount_and_reason_typed(people, asked, amount, reason, refusal):
    execution, _ = asked
    operator = logged_in(people["operator"])
    before = record(execution)

    refused = operator.post(f"/executions/{execution.ref}/budget/", {"add_usd": amount, "reason": reason})

    assert refused.status_code == 422
    page = refused.content.decode()
    form = form_of(page, "budget")
    assert f"The budget was not raised: {refusal}" in error_of(page, "budget")
    assert f'autocomplete="off" value="{escape(amount)}"></label>' in form
    shown = "" if "\x00" in reason else reason[:2000]  # what can't be stored as text isn't shown either
    assert f'<input name="reason" required maxlength="2000" value="{escape(shown)}"></label>' in form
    assert record(execution) == before, "a refused raise writes nothing"


def test_only_the_refused_raise_is_filled_in_and_a_good_one_is_not(people, asked):
    execution, _ = asked
    operator = logged_in(people["operator"])
    reason = "the ticket is <long>"
    refused = operator.post(f"/executions/{execution.ref}/budget/", {"add_usd": "lots", "reason": reason})
    assert refused.status_code == 422

    form = form_of(operator.get(f"/executions/{execution.ref}/").content.decode(), "budget")
    assert all(empty in form for empty in EMPTY_BUDGET) and 'id="budget-error"' not in form

    raised = operator.post(f"/executions/{execution.ref}/budget/", {"add_usd": "$0.5", "reason": reason}, follow=True)
    page = raised.content.decode()
    assert raised.redirect_chain == [(f"/executions/{execution.ref}/", 302)]
    assert f"Raised the budget of {execution.ref} to $1.5" in page and 'id="budget-error"' not in page
    assert all(empty in form_of(page, "budget") for empty in EMPTY_BUDGET)
    execution.refresh_from_db()
    assert float(execution.budget_usd) == pytest.approx(1.5)


# --- the reasons of pause and of a legal hold


@pytest.mark.parametrize(
    ("form", "who", "fields", "refusal"),
    [
        ("pause", "operator", {"reason": "   "}, "reason: say why it is held"),
        ("pause", "operator", {"reason": "<audit> " + "x" * 2000}, "reason: String should have at most 2000"),
        ("hold", "auditor", {"hold": "place", "reason": "   "}, "The legal hold was not placed: reason"),
    ],
    ids=["pause-no-reason", "pause-reason-too-long", "hold-no-reason"],
)
def test_a_refused_reason_comes_back_typed(people, waiting, form, who, fields, refusal):
    before = record(waiting)

    refused = logged_in(people[who]).post(f"/executions/{waiting.ref}/{form}/", fields)

    assert refused.status_code == 422
    page = refused.content.decode()
    assert refusal in error_of(page, form)
    typed = fields["reason"][:2000]
    assert f'<input name="reason" required maxlength="2000" value="{escape(typed)}">' in form_of(page, form)
    assert record(waiting) == before, f"a refused {form} writes nothing"


@pytest.mark.parametrize(
    ("form", "who", "extra", "after"),
    [("pause", "operator", {}, (Status.PAUSED, False)), ("hold", "auditor", {"hold": "place"}, (Status.WAITING, True))],
    ids=["pause", "hold"],
)
def test_only_the_refused_reason_is_filled_in_and_a_good_one_acts(people, waiting, form, who, extra, after):
    client = logged_in(people[who])
    assert client.post(f"/executions/{waiting.ref}/{form}/", {**extra, "reason": " "}).status_code == 422
    drawn = form_of(client.get(f"/executions/{waiting.ref}/").content.decode(), form)
    assert '<input name="reason" required maxlength="2000">' in drawn and f'id="{form}-error"' not in drawn

    done = client.post(f"/executions/{waiting.ref}/{form}/", {**extra, "reason": "audit <2026-17>"}, follow=True)
    assert done.redirect_chain == [(f"/executions/{waiting.ref}/", 302)]
    waiting.refresh_from_db()
    assert (waiting.status, waiting.hold_at is not None) == after


def test_a_refused_hold_with_no_form_to_place_one_says_why_in_the_messages(people, waiting):
    """On hold already, the page draws the release form: the refusal is in the messages."""
    auditor = logged_in(people["auditor"])
    auditor.post(f"/executions/{waiting.ref}/hold/", {"hold": "place", "reason": "litigation 2026-17"})
    before = record(waiting)

    refused = auditor.post(f"/executions/{waiting.ref}/hold/", {"hold": "place", "reason": " "})

    page = refused.content.decode()
    assert refused.status_code == 422 and 'id="hold-error"' not in page and "Release the legal hold" in page
    messages = page[page.index('id="messages"') : page.index("</div>", page.index('id="messages"'))]
    assert "The legal hold was not placed: reason" in messages
    assert record(waiting) == before


# --- the other free texts: retry now, accept a new request, restart, close a compensation, remind, redraft

# form → who sends it, its URL under the execution's, the free text field and its most characters.
TEXT_FORMS = {
    "retry": ("operator", "retry/", "reason", 2000),
    "accept_request": ("operator", "accept-request/", "reason", 2000),
    "restart": ("operator", "restart/", "reason", 2000),
    "close": ("operator", "compensations/close/", "evidence", 4000),
    "remind": ("operator", "remind/", "reason", 2000),
    "redraft": ("requester", "redraft/", "instruction", 4000),
}


@pytest.fixture
def drawing(request, settings):
    """form → (the execution whose page draws it, the rest of the form as the page fills
    it in, the anchor that finds it on the page), each state reached only when asked for."""

    def at(form: str) -> tuple[Execution, dict[str, str], str]:
        if form == "retry":
            return request.getfixturevalue("retrying"), {}, ""
        if form == "accept_request":
            execution = request.getfixturevalue("drifted")
            stopped = drift.drift_of(execution)
            return execution, {"key": stopped.key, "request_sha256": stopped.rebuilt_sha256}, ""
        world = request.getfixturevalue("world")
        if form == "restart":
            return world["failed"], {"from_step": "publish"}, ""
        if form == "close":
            key = world["compensation"].key
            return world["compensation"].execution, {"key": key, "outcome": "failed"}, f'value="{key}"'
        return world["awaiting"], {}, ""

    return at


def drawn_id(form: str) -> str:
    return form.replace("_", "-")  # accept_request: accept-request-form, accept-request-error


@pytest.mark.parametrize(
    ("form", "typed", "refusal"),
    [
        ("retry", "   ", "say why it should run now"),
        ("retry", 'the quota <was> "raised" ' + "x" * 2000, "reason: String should have at most 2000"),
        ("accept_request", "   ", "say why the new request is right"),
        ("accept_request", "the <new> wording & " + "x" * 2000, "reason: String should have at most 2000"),
        ("restart", "   ", "say why it should run again"),
        ("restart", "the provider is <back> & " + "x" * 2000, "reason: String should have at most 2000"),
        ("close", "   ", "evidence: String should have at least 1"),
        ("close", 'retracted <at> the "provider" ' + "x" * 4000, "evidence: String should have at most 4000"),
        ("remind", "   ", "Nobody was reminded: reason: say why you remind them"),
        ("remind", "the customer <calls> " + "x" * 2000, "Nobody was reminded: reason: String should have at most"),
        ("redraft", "   ", "instruction: String should have at least 1"),
        ("redraft", "shorter & <plainer> " + "x" * 4000, "instruction: String should have at most 4000"),
    ],
    ids=[f"{form}-{field}-{case}" for form, (_, _, field, _) in TEXT_FORMS.items() for case in ("none", "too-long")],
)
def test_a_refused_free_text_comes_back_typed_beside_its_form(people, drawing, form, typed, refusal):
    execution, filled, anchor = drawing(form)
    who, url, field, most = TEXT_FORMS[form]
    before = record(execution)

    refused = logged_in(people[who]).post(f"/executions/{execution.ref}/{url}", {**filled, field: typed})

    assert refused.status_code == 422
    page = refused.content.decode()
    name = drawn_id(form)
    assert refusal in error_of(page, name, anchor)
    drawn = form_of(page, name, anchor)
    assert f'<input name="{field}" required maxlength="{most}" value="{escape(typed[:most])}">' in drawn
    assert form != "close" or '<option value="failed" selected>not possible' in drawn  # its outcome, as chosen
    assert record(execution) == before, f"a refused {form} writes nothing"
    assert not Execution.objects.filter(restarted_from=execution).exists()


@pytest.mark.parametrize("form", list(TEXT_FORMS))
def test_only_the_refused_free_text_is_filled_in(people, drawing, form):
    execution, filled, anchor = drawing(form)
    who, url, field, most = TEXT_FORMS[form]
    client = logged_in(people[who])
    assert client.post(f"/executions/{execution.ref}/{url}", {**filled, field: " "}).status_code == 422

    page = client.get(f"/executions/{execution.ref}/").content.decode()
    drawn = form_of(page, drawn_id(form), anchor)
    assert f'<input name="{field}" required maxlength="{most}">' in drawn
    assert f'id="{drawn_id(form)}-error"' not in page and " selected>not possible" not in drawn


def test_a_refused_restart_keeps_the_step_chosen_and_the_repeats_accepted(people, world):
    """The choice and the box come back as they were sent, not as the page first offers them.
    (Its publish went out before the step failed: a restart from any step sends it again.)"""
    failed = world["failed"]
    publish_action(failed, Action.State.SUCCEEDED)
    operator = logged_in(people["operator"])
    first = form_of(operator.get(f"/executions/{failed.ref}/").content.decode(), "restart")
    assert '<option value="publish" selected>' in first and 'id="accept-repeats">' in first

    refused = operator.post(
        f"/executions/{failed.ref}/restart/", {"from_step": "review", "reason": " ", "accept_repeats": "true"}
    )

    assert refused.status_code == 422
    drawn = form_of(refused.content.decode(), "restart")
    assert '<option value="review" selected>' in drawn and drawn.count(" selected>") == 1
    assert 'id="accept-repeats" checked>' in drawn
    assert not Execution.objects.filter(restarted_from=failed).exists()

    # A step the form doesn't offer (a stale page): refused, and the form's own choice stands.
    stale = operator.post(
        f"/executions/{failed.ref}/restart/", {"from_step": "audit", "reason": "the provider <is> back"}
    )
    assert stale.status_code == 422
    page = stale.content.decode()
    assert escape("has no step 'audit'") in error_of(page, "restart")
    drawn = form_of(page, "restart")
    assert '<option value="publish" selected>' in drawn and drawn.count(" selected>") == 1
    assert 'value="the provider &lt;is&gt; back">' in drawn and 'id="accept-repeats">' in drawn


def test_a_refused_close_for_a_key_the_page_draws_no_form_for_says_why_in_the_messages(people, world):
    """Evidence refused for an action that is no open compensation of this page: no form to
    show it beside, so the messages say it; nothing is written."""
    cancelled = world["compensation"].execution
    before = record(cancelled)

    refused = logged_in(people["operator"]).post(
        f"/executions/{cancelled.ref}/compensations/close/",
        {"key": world["action"].key, "outcome": "failed", "evidence": " "},
    )

    page = refused.content.decode()
    assert refused.status_code == 422 and 'id="close-error"' not in page
    messages = page[page.index('id="messages"') : page.index("</div>", page.index('id="messages"'))]
    assert "evidence: String should have at least 1" in messages
    assert record(cancelled) == before
