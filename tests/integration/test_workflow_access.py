"""Access by workflow (``KEEL_WORKFLOW_ACCESS``, docs/operations.md "Access by workflow"):
the rule, the start-up refusals, and every read and act of the API, the pages and the CLI
for a user outside a workflow's groups — walked from the OpenAPI document and the URL
patterns, so a new endpoint or page is walked without editing this file. S63 itself, with
real workers, the e-mail audience and the browser, is tests/scenarios/test_workflow_access.py.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from access import rules
from executions.models import Execution
from executions.services import execution_start
from schedules.models import Schedule
from tests.support.screens import decide_form, logged_in, make_gate
from tests.support.settings_probe import clean_env, django

pytestmark = pytest.mark.django_db

RESTRICTED = "monthly_report"
ACCESS = {
    RESTRICTED: {"read": ["reporting"], "start": ["reporting"], "decide": ["reporting"], "operate": ["reporting"]}
}


@pytest.fixture
def restricted(people, settings):
    """``monthly_report`` belongs to the group ``reporting`` (the requester and manager2);
    an execution of it waits at its approval gate; one of ``replacement_order`` (open) waits
    to start. Returns (hidden, its approval request, the open one)."""
    reporting = Group.objects.create(name="reporting")
    for name in ("requester", "manager2"):
        people[name].user.groups.add(reporting)
    settings.KEEL_WORKFLOW_ACCESS = ACCESS
    request = make_gate(people)
    open_one, _ = execution_start(
        user=people["requester"].user, workflow="replacement_order", input={"original_order": "ORD-1001"}
    )
    return request.execution, request, open_one


# --- the rule


def test_a_workflow_not_named_is_open_and_one_named_belongs_to_its_groups(people, settings):
    manager, requester = people["manager"].user, people["requester"].user
    settings.KEEL_WORKFLOW_ACCESS = {}
    assert rules.allows(manager, "read", RESTRICTED) and rules.hidden(manager) == frozenset()
    settings.KEEL_WORKFLOW_ACCESS = {RESTRICTED: {"read": [], "start": [], "decide": ["approvers"], "operate": []}}
    assert rules.hidden(manager) == {RESTRICTED}
    assert rules.allows(manager, "read", "replacement_order")  # not named: open
    approvers = Group.objects.create(name="approvers")
    manager.groups.add(approvers)
    del manager._keel_group_names
    assert rules.allows(manager, "read", RESTRICTED)  # who may decide it reads it
    assert rules.allows(manager, "decide", RESTRICTED) and not rules.allows(manager, "operate", RESTRICTED)
    assert not rules.allows(requester, "read", RESTRICTED)
    requester.is_superuser = True
    assert rules.allows(requester, "operate", RESTRICTED)


# --- every read and act, as a user outside the groups


def _api_paths() -> list[tuple[str, str]]:
    from config.api import api

    schema = api.get_openapi_schema()
    return [(method.upper(), path) for path, ops in schema["paths"].items() for method in ops]


def _filled(path: str, values: dict[str, str]) -> str | None:
    """``path`` with each ``{param}`` / ``<conv:param>`` filled from ``values`` (None: one unknown)."""
    names = re.findall(r"\{(\w+)\}|<(?:\w+:)?(\w+)>", path)
    for name in (a or b for a, b in names):
        if name not in values:
            return None
    return re.sub(r"\{(\w+)\}|<(?:\w+:)?(\w+)>", lambda m: values[m.group(1) or m.group(2)], path)


def _page_patterns(resolver: URLResolver | None = None, prefix: str = "") -> list[str]:
    out = []
    for entry in (resolver or get_resolver()).url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            if route.startswith(("admin/", "api/")):
                continue
            out += _page_patterns(entry, route)
        elif isinstance(entry, URLPattern):
            out.append("/" + route.lstrip("^").rstrip("$").replace("\\Z", ""))
    return out


def _values(hidden: Execution, request) -> dict[str, str]:
    version = request.artifact_version
    return {
        "execution_id": hidden.ref,
        "ref": hidden.ref,
        "approval_id": str(request.pk),
        "pk": str(request.pk),
        "artifact_ref": version.artifact.ref if hasattr(version.artifact, "ref") else str(version.artifact.pk),
        "number": str(version.number),
        "name": RESTRICTED,
        "workflow": RESTRICTED,
    }


NOBODY = {  # what no row is: the answer a hidden one must give
    "execution_id": "RUN_987654",
    "ref": "RUN_987654",
    "approval_id": "987654",
    "pk": "987654",
    "artifact_ref": "REPORT_987654",
    "number": "1",
    "name": "no_such_workflow",
    "workflow": "no_such_workflow",
}


def _answer(client, method: str, path: str):
    if method == "GET":
        return client.get(path)
    if not path.startswith("/api/"):  # a page's form
        return client.post(path, {"reason": "x", "decision": "approve"})
    return client.generic(method, path, data="{}", content_type="application/json")


@pytest.mark.parametrize("who", ["manager", "operator", "auditor", "outsider"])
def test_every_api_path_and_page_hides_the_workflow_from_a_user_outside_its_groups(people, restricted, who):
    """Every API operation and page that names the hidden execution (its id, approval,
    artifact, workflow) answers as it does for one that never existed; every other one
    (lists, counts, the inbox, the measures, the audits) never shows its id."""
    hidden, request, open_one = restricted
    client, poster = logged_in(people[who]), logged_in(people[who])
    values = _values(hidden, request)
    walked = 0
    pages = [
        (method, p)
        for p in _page_patterns()
        if not p.startswith(("/logout", "/login", "/oidc"))
        for method in (("GET", "POST") if "<" in p else ("GET",))  # a form posted at the hidden one, too
    ]
    for method, path in [*_api_paths(), *pages]:
        filled = _filled(path, values)
        if filled is None:
            continue
        if filled == path:  # no parameter: a list, a count, a measure, a page
            if method != "GET":
                continue
            answer = client.get(filled)
            assert answer.status_code < 500, (who, filled, answer.status_code)
        else:
            # A form's message about the id typed shows on the next page: posts go through a session of their own.
            asking = client if method == "GET" else poster
            answer = _answer(asking, method, filled)
            absent = _answer(asking, method, _filled(path, NOBODY))
            assert answer.status_code == absent.status_code, (who, method, filled, answer.status_code)
            assert answer.status_code in (302, 400, 401, 403, 404, 405, 422), (who, method, filled, answer.status_code)
            if answer.status_code == 302:  # a page's form: back where the absent one's goes
                assert answer["Location"].replace(hidden.ref, "RUN_987654") == absent["Location"], (who, filled)
            if path.startswith("/api/"):  # the same sentence, but for the id it names
                said = answer.content.decode()
                for key in ("execution_id", "approval_id", "name"):
                    said = re.sub(rf"\b{values[key]}\b", NOBODY[key], said)
                assert said == absent.content.decode(), (who, method, filled)
            walked += 1
            continue
        assert hidden.ref not in answer.content.decode(errors="replace"), (who, method, filled)
        walked += 1
    assert walked > 80, walked
    assert client.get(f"/api/executions/{hidden.ref}").status_code == 404
    # The open workflow is still theirs to read, and the counts count only it.
    assert client.get(f"/api/executions/{open_one.ref}").status_code == 200
    assert [e["id"] for e in client.get("/api/executions").json()["items"]] == [open_one.ref]
    summary = client.get("/api/executions/summary")
    if summary.status_code == 200:
        assert sum(summary.json()["by_status"].values()) == 1, summary.json()


def test_related_rows_follow_their_owner_and_children_their_own_workflow(people, restricted):
    """A related manager's rows take the owner's workflow (no join per instance); a parent's
    children are each of their own: a hidden child stays hidden under a readable parent."""
    from access.viewer import looking_as

    hidden, request, open_one = restricted
    Execution.objects.filter(pk=hidden.pk).update(parent=open_one)
    with looking_as(people["manager"].user):
        parent = Execution.objects.get(pk=open_one.pk)
        assert list(parent.children.all()) == []
        assert Execution.objects.filter(parent=parent).count() == 0
        seen = Execution._base_manager.get(pk=hidden.pk)  # reached another way: its rows stay hidden
        assert list(seen.approval_requests.all()) == [] and seen.events.count() == 0
    with looking_as(people["manager2"].user):
        assert [c.pk for c in Execution.objects.get(pk=open_one.pk).children.all()] == [hidden.pk]
        assert Execution.objects.get(pk=hidden.pk).approval_requests.get() == request


def test_a_schedule_whose_creator_lost_the_workflow_is_refused_and_the_others_still_fire(people, restricted):
    """Beat fires each schedule as its creator: one who may no longer start its workflow gets
    a refused firing that says why, and the tick goes on to the other schedules."""
    from schedules import services as schedules

    requester = people["requester"].user
    mine = schedules.schedule_create(
        user=people["operator"].user, workflow="replacement_order", cron="0 * * * *"
    )  # an open workflow, as the operator
    theirs = Schedule.objects.create(
        workflow=RESTRICTED,
        cron="0 * * * *",
        input={"month": "2026-08"},
        created_by=requester,
        next_fire_at=mine.next_fire_at,
    )
    Schedule.objects.filter(pk=mine.pk).update(input={"original_order": "ORD-1001"})
    requester.groups.remove(Group.objects.get(name="reporting"))  # they left the team
    fired = {f.schedule_id: f for f in schedules.fire_due(now=mine.next_fire_at + timedelta(seconds=5))}
    assert fired[theirs.pk].outcome == "refused", fired[theirs.pk].detail
    assert "may not start monthly_report now" in fired[theirs.pk].detail
    assert fired[mine.pk].outcome == "started" and fired[mine.pk].execution.workflow == "replacement_order"


def test_the_monitoring_scrape_counts_every_workflow(people, restricted, settings):
    """``/metrics`` is the monitoring system's, not a person's read: every workflow counts."""
    hidden, _, _ = restricted
    settings.RUNTIME_METRICS_TOKEN = "scrape-secret"
    scraped = logged_in(people["outsider"]).get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret")
    assert scraped.status_code == 200
    wanted = f'keel_executions{{status="awaiting_approval",workflow="{RESTRICTED}"}} 1.0'
    assert wanted in scraped.content.decode().splitlines()


def test_a_question_is_mailed_to_its_starter_only_while_they_may_read_it(people, restricted):
    """A child's creator is its parent's; one who may not read the child's workflow (or no
    longer may) is not e-mailed its question, which would carry what it asks."""
    from executions.models import Action, Question
    from notifications import planning

    hidden, _, _ = restricted
    requester = people["requester"].user
    Question.objects.create(
        execution=hidden, step="review", input_id="q1", tool="crm.lookup", message="Which customer, Ana Pereira?"
    )
    requester.groups.remove(Group.objects.get(name="reporting"))
    planning._questions()
    assert not Action.objects.filter(key__contains=":notify:requester:input.requested").exists()
    requester.groups.add(Group.objects.get(name="reporting"))
    planning._questions()
    assert Action.objects.filter(key__contains=":notify:requester:input.requested").count() == 1


def test_questions_no_one_can_be_told_of_never_keep_a_newer_one_from_being_told(people, monkeypatch):
    """A full batch of open questions whose starter turned e-mails off (their webhooks
    went) is left out of the questions' planner: a newer question is still e-mailed and
    its webhook goes."""
    from executions.models import Action, Question
    from notifications import planning
    from notifications.models import Preference

    monkeypatch.setattr(planning, "BATCH", 3)
    quiet, asking = people["requester"].user, people["operator"].user
    Preference.objects.create(user=quiet, email=False)
    for n in range(3):
        execution, _ = execution_start(user=quiet, workflow="monthly_report", input={"month": f"2026-0{n + 1}"})
        Question.objects.create(execution=execution, step="s", input_id=f"q{n}", tool="t", message="Which one?")
    planning._questions()
    assert Action.objects.filter(key__contains=":webhook:input.requested").count() == 3
    newer, _ = execution_start(user=asking, workflow="monthly_report", input={"month": "2026-09"})
    question = Question.objects.create(execution=newer, step="s", input_id="q9", tool="t", message="Which one?")
    planning._questions()
    told = set(Action.objects.filter(key__startswith=f"question:{question.pk}:").values_list("key", flat=True))
    assert told == {
        f"question:{question.pk}:notify:{asking.get_username()}:input.requested",
        f"question:{question.pk}:webhook:input.requested",
    }


def test_a_readable_childs_approval_never_names_its_hidden_parent(people, restricted):
    """The inbox and the approval page show a child's parent (a join, past the scoped
    managers) only to who may read the parent's workflow."""
    hidden, _, _ = restricted
    child = make_gate(
        people, workflow="replacement_order", requested_by="requester2" if "requester2" in people else "operator"
    )
    Execution.objects.filter(pk=child.execution_id).update(parent=hidden, parent_step="review")
    manager = logged_in(people["manager"])
    for path in ("/approvals/inbox/", f"/approvals/{child.pk}/"):
        page = manager.get(path).content.decode()
        assert child.execution.ref in page and hidden.ref not in page and "monthly_report" not in page, path
    insider = logged_in(people["manager2"]).get(f"/approvals/{child.pk}/").content.decode()
    assert "child of" in insider and hidden.ref in insider


def test_a_member_of_the_groups_reads_and_decides_it(people, restricted):
    hidden, request, _ = restricted
    client = logged_in(people["manager2"])
    assert client.get(f"/api/executions/{hidden.ref}").status_code == 200
    assert hidden.ref in client.get("/approvals/inbox/").content.decode()
    assert client.get("/api/executions/summary").json()["by_status"]["awaiting_approval"] == 1
    answer = client.post(
        f"/executions/{hidden.ref}/approvals/{request.pk}/decide/", decide_form(request), HTTP_HX_REQUEST="true"
    )
    assert answer.status_code in (200, 204, 302), answer.content[:300]
    request.refresh_from_db()
    assert request.status == "approved"


def test_the_outsiders_acts_on_it_are_404_and_write_nothing(people, restricted):
    hidden, request, _ = restricted
    before = hidden.events.count()
    manager, operator = logged_in(people["manager"]), logged_in(people["operator"])
    decision = {
        "type": "approval.decision",
        "approval_id": request.pk,
        "decision": "approve",
        "artifact_version": request.version,
        "content_sha256": request.content_sha256,
        "event_id": "e-1",
    }
    assert (
        manager.post(f"/api/executions/{hidden.ref}/events", decision, content_type="application/json").status_code
        == 404
    )
    cancel = operator.post(f"/api/executions/{hidden.ref}/cancel", {"reason": "x"}, content_type="application/json")
    assert cancel.status_code == 404, cancel.content
    start = manager.post(
        "/api/executions", {"workflow": RESTRICTED, "input": {"month": "2026-08"}}, content_type="application/json"
    )
    unknown = manager.post(
        "/api/executions", {"workflow": "no_such_workflow", "input": {}}, content_type="application/json"
    )
    assert start.status_code == unknown.status_code == 422, start.content
    said = json.dumps(start.json()["detail"])
    assert said == json.dumps(unknown.json()["detail"]).replace("no_such_workflow", RESTRICTED), said
    assert "known: " in said and RESTRICTED not in said.split("known: ")[1]
    assert Execution.objects.filter(workflow=RESTRICTED).count() == 1
    assert hidden.events.count() == before
    request.refresh_from_db()
    assert request.status == "pending"


def test_who_reads_it_but_may_not_act_is_refused_with_the_reason(people, settings):
    readers = Group.objects.create(name="readers")
    for name in ("manager", "operator"):
        people[name].user.groups.add(readers)
    settings.KEEL_WORKFLOW_ACCESS = {RESTRICTED: {"read": ["readers"], "decide": ["deciders"], "operate": ["ops"]}}
    request = make_gate(people)
    hidden = request.execution
    operator, manager = logged_in(people["operator"]), logged_in(people["manager"])
    assert operator.get(f"/api/executions/{hidden.ref}").status_code == 200
    cancel = operator.post(f"/api/executions/{hidden.ref}/cancel", {"reason": "x"}, content_type="application/json")
    assert cancel.status_code == 403 and "KEEL_WORKFLOW_ACCESS" in cancel.json()["detail"], cancel.content
    decision = {
        "type": "approval.decision",
        "approval_id": request.pk,
        "decision": "approve",
        "artifact_version": request.version,
        "content_sha256": request.content_sha256,
        "event_id": "e-2",
    }
    decided = manager.post(f"/api/executions/{hidden.ref}/events", decision, content_type="application/json")
    assert decided.status_code == 403 and RESTRICTED in decided.json()["detail"], decided.content
    hidden.refresh_from_db()
    assert hidden.status == "awaiting_approval"


def _keel(*args: str) -> tuple[int, str]:
    out = []

    class Sink:
        def write(self, text):
            out.append(text)

        def flush(self):
            pass

    try:
        call_command("keel", *args, stdout=Sink(), stderr=Sink())
    except CommandError as exc:
        return exc.returncode, str(exc)
    except SystemExit as exc:
        return int(exc.code or 0), "".join(out)
    return 0, "".join(out)


def test_the_cli_as_a_user_outside_the_groups(people, restricted):
    hidden, _, open_one = restricted
    status, said = _keel("show", hidden.ref, "--as", "manager")
    assert status == 2 and f"no execution {hidden.ref}" in said, (status, said)
    status, said = _keel("list", "--as", "manager", "--json")
    assert status == 0 and hidden.ref not in said and open_one.ref in said, said
    status, said = _keel("cancel", hidden.ref, "--as", "operator", "--reason", "x")
    assert status == 2 and "no execution" in said, (status, said)
    status, said = _keel("show", hidden.ref, "--as", "manager2")
    assert status == 0 and hidden.ref in said
    status, said = _keel("show", hidden.ref)  # the shell reads everything
    assert status == 0


def _argv(command, values: dict[str, str]) -> list[str] | None:
    """``command``'s words with every required argument filled from ``values`` (None: one
    it doesn't know how to fill)."""
    import argparse

    parser = argparse.ArgumentParser()
    command.arguments(parser)
    argv = command.name.split()
    for action in parser._actions:
        if action.dest == "help" or not (action.required or not action.option_strings):
            continue
        if action.dest not in values:
            return None
        argv += [action.option_strings[0], values[action.dest]] if action.option_strings else [values[action.dest]]
    if command.name == "bulk":  # on exactly the hidden one
        argv += ["--id", values["id"], "--reason", "x"]
    return argv


def test_every_cli_command_as_a_user_outside_the_groups(people, restricted):
    """Every command of ``manage.py keel`` that names an execution, an action, a schedule
    or the workflow, run ``--as`` each outsider, answers as it does for one that never
    existed, and writes nothing; the shell without ``--as`` and the insider still see it."""
    from cli.management.commands.keel import Command as Keel
    from cli.registry import commands
    from executions.models import Action, ExecutionEvent
    from schedules.models import Schedule

    hidden, request, _ = restricted
    Keel().create_parser("manage.py", "keel")  # the commands register as their modules load
    action = Action.objects.create(
        key=f"{hidden.ref}:publish:v1", execution=hidden, step="publish", type="publish_report", status="unknown"
    )
    schedule = Schedule.objects.create(
        workflow=RESTRICTED, cron="0 3 * * *", created_by=people["requester"].user, next_fire_at=timezone.now()
    )
    common = {
        "reason": "x",
        "add_usd": "1",
        "outcome": "succeeded",
        "evidence": "x",
        "from_step": "review",
        "decision": "approve",
        "version": "1",
        "percent": "10",
        "to": "1",
        "cron": "0 4 * * *",
        "operation": "cancel",
        "approval": str(request.pk),
        "sha256": request.content_sha256,
    }
    mine = {**common, "id": hidden.ref, "key": action.key, "workflow": RESTRICTED, "name": RESTRICTED}
    nobody = {
        **common,
        "id": "RUN_987654",
        "key": "RUN_987654:publish:v1",
        "workflow": "no_such_workflow",
        "name": "no_such_workflow",
    }
    events = ExecutionEvent.objects.filter(execution=hidden).count()
    walked = []
    for command in commands():
        if not (command.acts or command.as_optional) or command.name in ("list", "schedules", "archive"):
            continue
        argv = _argv(command, mine)
        if argv is None:
            continue
        if command.name == "schedules delete":
            argv[-1] = str(schedule.pk)
        for who in ("manager", "operator"):
            status, said = _keel(*argv, "--as", who)
            other = _argv(command, nobody)
            if command.name == "schedules delete":
                other[-1] = "987654"
            absent_status, absent = _keel(*other, "--as", who)
            assert status != 0, (who, argv, said)
            assert (status, _as_nobody(said, hidden, action, schedule)) == (absent_status, absent), (who, argv)
        walked.append(command.name)
    assert {"show", "cancel", "resume", "decide", "resolve", "restart", "signal", "budget", "hold"} <= set(walked)
    assert ExecutionEvent.objects.filter(execution=hidden).count() == events  # nothing written
    assert _keel("show", hidden.ref, "--as", "manager2")[0] == 0


def _as_nobody(said: str, hidden, action, schedule) -> str:
    for mine, theirs in (
        (action.key, "RUN_987654:publish:v1"),
        (hidden.ref, "RUN_987654"),
        (RESTRICTED, "no_such_workflow"),
        (f"schedule {schedule.pk}", "schedule 987654"),
    ):
        said = said.replace(mine, theirs)
    return said


# --- start-up


@pytest.mark.parametrize(
    ("value", "sentence"),
    [
        ("[1]", "KEEL_WORKFLOW_ACCESS must be"),
        ("{not json", "KEEL_WORKFLOW_ACCESS is not JSON"),
        ('{"monthly_report": {"approve": ["g"]}}', "unknown act 'approve'"),
        ('{"monthly_report": {"read": "g"}}', "must be a list of group names"),
    ],
)
def test_a_malformed_rule_stops_start_up(tmp_path, value, sentence):
    done = django(clean_env(tmp_path, KEEL_WORKFLOW_ACCESS=value), "pass")
    assert done.returncode != 0
    assert sentence in done.stderr.strip().splitlines()[-1], done.stderr[-500:]


def test_an_unknown_workflow_or_group_stops_start_up_naming_it(tmp_path, transactional_db):
    Group.objects.get_or_create(name="reporting")
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    unknown_workflow = json.dumps({"monthly_reprot": {"read": ["reporting"]}})
    done = django(clean_env(tmp_path, KEEL_WORKFLOW_ACCESS=unknown_workflow, DATABASE_URL=url), "pass")
    assert done.returncode != 0 and "the workflow 'monthly_reprot'" in done.stderr, done.stderr[-500:]
    unknown_group = json.dumps({"monthly_report": {"read": ["reporting", "reportnig"]}})
    done = django(clean_env(tmp_path, KEEL_WORKFLOW_ACCESS=unknown_group, DATABASE_URL=url), "pass")
    assert done.returncode != 0 and "the group 'reportnig'" in done.stderr, done.stderr[-500:]
    known = json.dumps({"monthly_report": {"read": ["reporting"]}})
    done = django(clean_env(tmp_path, KEEL_WORKFLOW_ACCESS=known, DATABASE_URL=url), "pass")
    assert done.returncode == 0, done.stderr[-500:]
