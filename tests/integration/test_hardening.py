"""The last ways in, closed (issue 18, Low and Info): each attack against real processes
where it is one (the web server over HTTP, the application's database role), the rules
behind them as plain tests."""

from __future__ import annotations

import csv
import io
import re
import uuid

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client

from approvals.spreadsheet import safe_cell
from executions.models import ExecutionEvent
from tests.support.procs import http
from tests.support.roles import dsn
from tests.support.settings_probe import PRINT_KEY, clean_env, django
from tests.support.stack import APP_DB_ROLE, wait_status

LONG = "u" * 300


def form_session(base: str, path: str) -> tuple:
    """A browser-like session on ``path``: its CSRF cookie and the form's token."""
    session = http()
    page = session.get(base + path, timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return session, token


def login(base: str, path: str, username: str, password: str, **headers: str):
    session, token = form_session(base, path)
    body = {"username": username, "password": password, "csrfmiddlewaretoken": token, "next": "/"}
    return session.post(base + path, data=body, headers={"Referer": base + path, **headers}, timeout=10)


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_l5_a_256_character_username_is_an_invalid_login_not_a_500(stack, people, path):
    stack.up(beat=False, workers=0)
    answer = login(stack.web_url, path, LONG, "whatever")
    assert answer.status_code == 200
    assert "didn’t match" in answer.text or "didn't match" in answer.text or "correct username" in answer.text


def test_info_lockouts_are_per_real_client_behind_the_documented_proxy(stack, people):
    """Five wrong passwords for the manager from one client, through the proxy: that
    client is locked out, the manager logging in from elsewhere is not."""
    stack.up(beat=False, workers=0, web_env={"KEEL_TRUSTED_PROXY_COUNT": "1"})
    base, manager = stack.web_url, people["manager"]
    # The web process hashes as production does (the tests' own hasher is MD5, for speed).
    manager.user.password = PBKDF2PasswordHasher().encode(manager.password, "saltsaltsalt")
    manager.user.save(update_fields=["password"])
    attacker = {"X-Forwarded-For": "203.0.113.9"}
    for _ in range(5):
        login(base, "/login/", "manager", "wrong", **attacker)
    locked = login(base, "/login/", "manager", manager.password, **attacker)
    assert locked.status_code == 429
    real = login(base, "/login/", "manager", manager.password, **{"X-Forwarded-For": "198.51.100.7"})
    assert real.status_code == 200 and real.url.rstrip("/") == base  # signed in, on the list


def test_l7_a_squatted_event_id_does_not_refuse_someone_elses_signal(stack, people, api_as):
    """The outsider uses event id ship-1 on their own waiting run first; the requester's
    real signal with the same id still wakes theirs (ids are per execution)."""
    stack.up()
    manager = api_as(people["manager"])
    waiting = {}
    for who in ("outsider", "requester"):
        api = api_as(people[who])
        ref = api.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1001"}})
        ref = ref.json()["id"]
        approval = wait_status(api, ref, "awaiting_approval")["pending_approval"]
        assert manager.decide(ref, approval).status_code == 202
        wait_status(api, ref, "waiting")
        waiting[who] = (api, ref)

    squatter, squatted = waiting["outsider"], waiting["requester"]
    assert (
        squatter[0].signal(squatter[1], "shipment_confirmed", {"tracking": "TRK-1"}, event_id="ship-1").status_code
        == 202
    )
    real = squatted[0].signal(squatted[1], "shipment_confirmed", {"tracking": "TRK-2"}, event_id="ship-1")
    assert real.status_code == 202, real.text
    again = squatted[0].signal(squatted[1], "shipment_confirmed", {"tracking": "TRK-2"}, event_id="ship-1")
    assert again.status_code == 202 and again.json() == real.json()  # still idempotent on its own execution
    wait_status(squatted[0], squatted[1], "completed")


def test_l8_renaming_an_approver_does_not_rewrite_history(stack, people, api_as):
    stack.up(beat=False)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = requester.start()["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert manager.decide(ref, approval).status_code == 202

    user = people["manager"].user
    user.username = "someone-else"
    user.save()
    auditor = Client()
    auditor.force_login(people["auditor"].user)
    exported = list(csv.DictReader(io.StringIO(auditor.get("/approvals/audit/export.csv").content.decode())))
    assert [row["decided_by"] for row in exported] == ["manager"]
    page = auditor.get(f"/approvals/audit/{approval['id']}/").content.decode()
    assert "by manager at" in page and "someone-else" not in page.split('id="story"')[0]
    assert auditor.get("/approvals/audit/?approver=manager").content.decode().count(f"#{approval['id']}") >= 1


def test_info_bodies_are_json_objects_without_unknown_fields(stack, people, api_as):
    stack.up(beat=False, workers=0)
    api = api_as(people["requester"])
    ref = api.start()["id"]
    for body in ([], ["reason"], "cancel", 3):
        answer = api.session.post(f"{api.base}/executions/{ref}/cancel", json=body, timeout=10)
        assert answer.status_code == 422, (body, answer.text)
        assert answer.json()["detail"][0]["loc"] == ["body"] and "JSON object" in answer.json()["detail"][0]["msg"]
    typo = api.post(
        "/executions", {"workflow": "monthly_report", "input": {"month": "2026-08"}, "idempotency_kye": "k"}
    )
    assert typo.status_code == 422
    [error] = typo.json()["detail"]
    assert error["loc"] == ["body", "idempotency_kye"] and error["type"] == "extra_forbidden"
    assert api.post(f"/executions/{ref}/cancel", {"reason": "done", "why": "x"}).status_code == 422
    assert api.execution(ref)["status"] != "cancelled"  # nothing was applied


def test_info_the_application_role_cannot_back_date_history(rows):
    """As keel_app, an INSERT that names created_at gets the database's clock instead;
    the owner (migrations, archives, fixtures) keeps what it writes."""
    with psycopg.connect(dsn(APP_DB_ROLE), autocommit=True) as app, app.cursor() as cur:
        cur.execute(
            "INSERT INTO executions_executionevent (execution_id, type, from_status, to_status, step, actor_label,"
            " payload, created_at) VALUES (%s, 'backdated', '', '', '', 'app', '{}', '2000-01-01') RETURNING"
            " created_at > now() - interval '1 minute'",
            [rows["execution"]],
        )
        assert cur.fetchone()[0] is True
        for table in (
            "approvals_auditentry",
            "approvals_decision",
            "artifacts_artifactversion",
            "executions_modelcall",
        ):
            cur.execute(
                "SELECT count(*) FROM pg_trigger WHERE tgrelid = %s::regclass AND tgname = 'keel_stamp_created_at'",
                [table],
            )
            assert cur.fetchone()[0] == 1, table
    with psycopg.connect(dsn("postgres"), autocommit=True) as owner, owner.cursor() as cur:
        cur.execute(
            "INSERT INTO executions_executionevent (execution_id, type, from_status, to_status, step, actor_label,"
            " payload, created_at) VALUES (%s, 'fixture', '', '', '', 'owner', '{}', '2000-01-01')",
            [rows["execution"]],
        )
    assert ExecutionEvent.objects.get(type="fixture").created_at.year == 2000


@pytest.mark.parametrize("key", ["k" * 60, "short-but-random-Xy7", "abcd" * 20])
def test_info_production_refuses_a_weak_secret_key(tmp_path, key):
    env = clean_env(tmp_path, KEEL_ENV="production", DJANGO_ALLOWED_HOSTS="keel.example.com", DJANGO_SECRET_KEY=key)
    done = django(env, PRINT_KEY)
    assert done.returncode != 0
    assert "KEEL_ENV=production refuses a weak DJANGO_SECRET_KEY" in done.stderr.strip().splitlines()[-1]
    strong = clean_env(tmp_path, KEEL_ENV="production", DJANGO_ALLOWED_HOSTS="keel.example.com")
    strong["DJANGO_SECRET_KEY"] = uuid.uuid4().hex + uuid.uuid4().hex
    assert django(strong, PRINT_KEY).returncode == 0


@pytest.mark.parametrize(
    "value",
    ["=1+1", " =1+1", '\ufeff=HYPERLINK("x")', "\u200b@SUM(A1)", "＝1+1", "　＋1", "－2", "\t=1", "\r=1", "\n-1"],
)
def test_info_a_csv_cell_that_a_spreadsheet_could_run_is_prefixed(value):
    assert safe_cell(value) == "'" + value


@pytest.mark.parametrize("value", ["manager", "a=b", "RUN_0001", "", None, 12, "2026-12-01T00:00:00"])
def test_info_ordinary_csv_cells_are_left_alone(value):
    assert safe_cell(value) == ("" if value is None else str(value))


@pytest.mark.parametrize("password", ["short-pw1", "password1234", "123456789012", "manager-manager"])
def test_info_weak_passwords_are_refused(db, password):
    user = get_user_model()(username="manager-manager", email="m@example.com")
    with pytest.raises(ValidationError):
        validate_password(password, user)
    validate_password("correct horse battery staple 9", user)


def test_l7_signal_event_ids_are_unique_per_execution_in_the_database(db):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT conname FROM pg_constraint WHERE conname = 'one_signal_event_per_execution'")
        assert cursor.fetchone() is not None


def test_info_the_artifact_content_declaration_fits_a_json_artifact(people, client):
    """schemathesis's one violation: a JSON artifact's bytes, parsed, are an object, which
    ``*/*`` declared as one binary string; application/json is declared on its own."""
    client.force_login(people["requester"].user)
    spec = client.get("/api/openapi.json").json()
    content = spec["paths"]["/api/artifacts/{artifact_id}/versions/{n}/content"]["get"]["responses"]["200"]["content"]
    declared = content["application/json"]["schema"]
    assert not {"type", "$ref", "enum", "const", "anyOf", "oneOf", "allOf"} & set(declared)  # any JSON value
    assert content["*/*"]["schema"]["format"] == "binary" and content["text/markdown"]["schema"]["type"] == "string"
