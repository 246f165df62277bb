"""Single sign-on as the environment configures it (docs/operations.md, "Single sign-on"): a
malformed setting stops start-up with one sentence, a role map entry naming no role is
ignored with a warning, unset changes nothing; the login page and the admin's follow
``OIDC_ISSUER`` and ``KEEL_PASSWORD_LOGIN``; a provider unreachable or misnamed, a stale
callback, a provider's error: the login page with a sentence and one log line. Who a
sign-in makes a user (``accounts.identities``): found by (issuer, subject) only, managed
groups following the claim, the access groups included. The whole flow against a real
provider is S62 (tests/scenarios/test_sso.py)."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.template import Context, Template
from django.test import Client

from accounts.identities import SignInRefused, identity_sign_in
from accounts.models import Identity
from accounts.roles import ensure_roles
from accounts.sso import discovery
from config.login import PASSWORD_LOGIN_OFF
from tests.support.settings_probe import clean_env, django

ISSUER = "https://id.example.com/realms/keel"
SSO = {"OIDC_ISSUER": ISSUER, "OIDC_CLIENT_ID": "keel", "OIDC_CLIENT_SECRET": "a-long-client-secret"}
PROBE = (
    "import sys; from django.conf import settings; "
    "print(json.dumps([settings.OIDC_ROLE_MAP, 'accounts.sso.backend.ProviderBackend' in settings.AUTHENTICATION_BACKENDS, "
    "settings.KEEL_PASSWORD_LOGIN, 'mozilla_django_oidc' in sys.modules]))"
)


def env_of(tmp_path, **env: str) -> dict[str, str]:
    """A fresh process's environment with ``env`` and no single sign-on setting of this one's."""
    return {k: v for k, v in clean_env(tmp_path, **env).items() if not k.startswith("OIDC_") or k in env}


def probe(tmp_path, **env: str):
    done = django(env_of(tmp_path, **env), "import json; " + PROBE)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


@pytest.mark.parametrize(
    ("env", "sentence"),
    [
        ({"OIDC_ROLE_MAP": "{managers}"}, "OIDC_ROLE_MAP is not JSON: "),
        (
            {"OIDC_ROLE_MAP": '["keel-managers"]'},
            'OIDC_ROLE_MAP must be a JSON object {"<provider group>": "managers"|"operators"|"auditors"}, not an array.',
        ),
        (
            {"OIDC_ISSUER": ISSUER},
            "OIDC_ISSUER is set but OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are not: register keel at the provider",
        ),
        ({"OIDC_ISSUER": ISSUER, "OIDC_CLIENT_ID": "keel"}, "OIDC_ISSUER is set but OIDC_CLIENT_SECRET is not: "),
        ({"OIDC_ISSUER": ISSUER, "OIDC_CLIENT_SECRET": "s"}, "OIDC_ISSUER is set but OIDC_CLIENT_ID is not: "),
        (
            {**SSO, "OIDC_ISSUER": "id.example.com"},
            "OIDC_ISSUER must be an http:// or https:// URL with a host, not 'id.example.com'.",
        ),
        (
            {**SSO, "OIDC_ISSUER": "ldap://id.example.com"},
            "OIDC_ISSUER must be an http:// or https:// URL with a host, not 'ldap://id.example.com'.",
        ),
        (
            {"KEEL_PASSWORD_LOGIN": "off"},
            "KEEL_PASSWORD_LOGIN=off needs OIDC_ISSUER: without single sign-on nobody could sign in to the dashboard.",
        ),
    ],
)
def test_a_malformed_setting_stops_start_up_with_one_sentence(tmp_path, env, sentence):
    done = django(env_of(tmp_path, **env), "pass")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: " + sentence), last


def test_a_map_entry_naming_no_role_is_ignored_with_a_warning_at_start(tmp_path):
    role_map = {"keel-managers": "managers", "keel-admins": "admins", "keel-ops": ["operators"]}
    (mapped, backend, password, _), stderr = probe(tmp_path, **SSO, OIDC_ROLE_MAP=json.dumps(role_map))
    assert mapped == {"keel-managers": "managers"} and backend and password
    warnings = [line for line in stderr.splitlines() if " WARNING accounts.sso " in line]
    assert len(warnings) == 2, stderr
    assert warnings[0].endswith(
        "OIDC_ROLE_MAP maps 'keel-admins' to \"admins\", which is not managers, operators or auditors: "
        "that entry is ignored."
    )
    assert "'keel-ops' to [\"operators\"]" in warnings[1]


def test_unset_nothing_changes(tmp_path):
    (mapped, backend, password, loaded), stderr = probe(tmp_path)
    assert (mapped, backend, password, loaded) == ({}, False, True, False)
    assert "accounts.sso" not in stderr


# --- The pages, in this process -----------------------------------------------------------


@pytest.fixture
def sso(settings):
    """Single sign-on configured in this process (discovery read afresh)."""
    for name, value in SSO.items():
        setattr(settings, name, value)
    discovery.forget()
    yield settings
    discovery.forget()


class _Discovery(BaseHTTPRequestHandler):
    document: dict = {}

    def do_GET(self):
        body = json.dumps(self.document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        return


@pytest.fixture
def provider_at():
    """An HTTP server of this process answering every GET with the discovery document
    ``make(its own URL)`` makes; its URL."""
    servers = []

    def serve(make) -> str:
        handler = type("Handler", (_Discovery,), {})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        handler.document = make(url)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return url

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def endpoints(url: str) -> dict[str, str]:
    return {"authorization_endpoint": f"{url}/auth", "token_endpoint": f"{url}/token", "jwks_uri": f"{url}/jwks"}


def refusals(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "accounts.sso" and r.levelno >= logging.WARNING]


@pytest.mark.django_db
def test_the_login_page_offers_what_is_configured(settings):
    plain = Client().get("/login/").content.decode()
    assert 'id="sso-login"' not in plain and 'type="password"' in plain
    assert Client().get("/oidc/authenticate/").status_code == 404
    assert Client().get("/oidc/callback/?code=c&state=s").status_code == 404

    settings.OIDC_ISSUER = ISSUER
    both = Client().get("/login/?next=/approvals/").content.decode()
    assert 'href="/oidc/authenticate/?next=/approvals/"' in both and "through id.example.com" in both
    assert 'type="password"' in both

    settings.KEEL_PASSWORD_LOGIN = False
    alone = Client().get("/login/").content.decode()
    assert 'id="sso-login"' in alone and 'type="password"' not in alone
    assert 'action="/login/"' not in alone


@pytest.mark.django_db
def test_password_sign_in_off_refuses_a_password_with_a_sentence(sso):
    sso.KEEL_PASSWORD_LOGIN = False
    get_user_model().objects.create_superuser("root", "root@example.com", "the-right-password")
    for path in ("/login/", "/admin/login/"):
        client = Client()
        answer = client.post(path, {"username": "root", "password": "the-right-password"})
        assert answer.status_code == (403 if path == "/login/" else 200), path
        assert PASSWORD_LOGIN_OFF in answer.content.decode().replace("&#x27;", "'"), path
        assert "_auth_user_id" not in client.session, path
    admin = Client().get("/admin/login/?next=/admin/auth/")
    assert admin.status_code == 302 and admin["Location"] == "/login/?next=/admin/auth/"


@pytest.mark.django_db
def test_a_provider_down_or_misnamed_brings_back_the_login_page_with_a_sentence(sso, provider_at, caplog):
    sso.OIDC_ISSUER = "http://127.0.0.1:9"  # nothing listens
    answer = Client().get("/oidc/authenticate/", follow=True)
    assert answer.redirect_chain == [("/login/", 302)] and answer.status_code == 200
    assert "The single sign-on provider (127.0.0.1:9) can&#x27;t be reached right now" in answer.content.decode()
    [line] = refusals(caplog)
    assert line.startswith("single sign-on refused: the provider's discovery document http://127.0.0.1:9/")

    # A document naming another issuer (a trailing slash makes another issuer) is refused too.
    caplog.clear()
    url = provider_at(lambda url: {"issuer": url, **endpoints(url)})
    sso.OIDC_ISSUER = url + "/"
    answer = Client().get("/oidc/authenticate/", follow=True)
    assert answer.redirect_chain == [("/login/", 302)]
    assert "Single sign-on is not set up correctly" in answer.content.decode()
    [line] = refusals(caplog)
    assert f"names the issuer {url!r}, not OIDC_ISSUER {url + '/'!r}" in line

    # The right one: to its authorization endpoint, with a state, a nonce and a PKCE challenge.
    caplog.clear()
    sso.OIDC_ISSUER = url
    answer = Client().get("/oidc/authenticate/?next=/approvals/")
    assert answer.status_code == 302 and answer["Location"].startswith(f"{url}/auth?response_type=code&")
    for param in ("state=", "nonce=", "code_challenge=", "code_challenge_method=S256", "client_id=keel"):
        assert param in answer["Location"], param
    assert "redirect_uri=http%3A%2F%2Ftestserver%2Foidc%2Fcallback%2F" in answer["Location"]
    assert refusals(caplog) == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "sentence", "reason"),
    [
        ("", "That sign-in did not start in this browser", "without a code and a state"),
        ("?code=c&state=never-started", "That sign-in did not start in this browser", "not one this browser"),
        (
            "?error=access_denied&error_description=End-User+aborted+interaction",
            "The provider did not sign you in (access_denied).",
            "the provider answered 'access_denied': 'End-User aborted interaction'",
        ),
    ],
)
def test_a_callback_that_cannot_be_ours_is_refused_with_a_sentence(sso, caplog, query, sentence, reason):
    answer = Client().get(f"/oidc/callback/{query}", follow=True)
    assert answer.redirect_chain == [("/login/", 302)]
    assert sentence in answer.content.decode().replace("&#x27;", "'")
    [line] = refusals(caplog)
    assert reason in line
    assert not get_user_model().objects.exists() and not Identity.objects.exists()


# --- Who a sign-in makes a user (accounts.identities) ---------------------------------------


@pytest.fixture
def roles(db, settings):
    ensure_roles()
    settings.OIDC_ROLE_MAP = {"keel-managers": "managers", "keel-auditors": "auditors"}
    settings.KEEL_WORKFLOW_ACCESS = {"monthly_report": {"read": ["finance"], "start": [], "decide": [], "operate": []}}
    return settings


def names(user) -> list[str]:
    return sorted(user.groups.values_list("name", flat=True))


def test_groups_follow_the_claim_roles_and_access_groups_alike(roles):
    claims = {"sub": "s-1", "preferred_username": "dana", "groups": ["keel-managers", "finance", "unmapped"]}
    dana = identity_sign_in(issuer=ISSUER, claims=claims)
    assert names(dana) == ["finance", "managers"]
    dana.groups.add(Group.objects.create(name="on-call"))  # outside the managed groups: kept
    dana.groups.add(Group.objects.get(name="operators"))  # a role the map does not name: kept
    again = identity_sign_in(issuer=ISSUER, claims={**claims, "groups": "keel-auditors"})
    assert again == dana and names(dana) == ["auditors", "on-call", "operators"]
    identity_sign_in(issuer=ISSUER, claims={"sub": "s-1"})  # no groups claim: no managed group
    assert names(dana) == ["on-call", "operators"]


def test_a_provider_group_named_like_a_role_grants_it_only_through_the_map(roles, settings):
    """An access rule may name a role (``"operate": ["operators"]``); a provider group called
    ``operators`` still grants nothing the role map doesn't, and takes nothing away."""
    settings.KEEL_WORKFLOW_ACCESS = {"monthly_report": {"read": ["finance"], "operate": ["operators"]}}
    claims = {"sub": "s-9", "preferred_username": "erin", "groups": ["operators", "finance"]}
    erin = identity_sign_in(issuer=ISSUER, claims=claims)
    assert names(erin) == ["finance"]
    erin.groups.add(Group.objects.get(name="operators"))  # given in the admin
    identity_sign_in(issuer=ISSUER, claims={**claims, "groups": []})
    assert names(erin) == ["operators"]


def test_a_user_is_found_by_issuer_and_subject_never_by_name_or_e_mail(roles):
    User = get_user_model()
    local = User.objects.create_user("alice", email="alice@example.com", password="a-local-password")
    claims = {"sub": "s-2", "preferred_username": "alice", "email": "alice@example.com", "groups": ["keel-managers"]}
    alice = identity_sign_in(issuer=ISSUER, claims=claims)
    assert alice != local and alice.username.startswith("alice-") and len(alice.username) == len("alice-") + 8
    assert names(local) == [] and alice.email == "alice@example.com"
    # The same subject at another provider is another person.
    other = identity_sign_in(issuer="https://other.example", claims=claims)
    assert other not in (alice, local) and Identity.objects.count() == 2
    # A name no username can hold is made safe.
    odd = identity_sign_in(issuer=ISSUER, claims={"sub": "s-3", "preferred_username": "Dr. Who?! <x>"})
    assert odd.username.startswith("Dr.-Who-x-")


def test_a_refusal_writes_nothing(roles):
    User = get_user_model()
    claims = {"sub": "s-4", "preferred_username": "erin", "groups": ["keel-managers"]}
    erin = identity_sign_in(issuer=ISSUER, claims=claims)
    with pytest.raises(SignInRefused, match="is not a list of group names"):
        identity_sign_in(issuer=ISSUER, claims={"sub": "s-5", "groups": {"keel-managers": True}})
    with pytest.raises(SignInRefused, match="the subject"):
        identity_sign_in(issuer=ISSUER, claims={"sub": "x" * 256})
    assert list(User.objects.all()) == [erin]
    User.objects.filter(pk=erin.pk).update(is_active=False)
    with pytest.raises(SignInRefused, match="is deactivated in keel") as refused:
        identity_sign_in(issuer=ISSUER, claims={**claims, "groups": []})
    assert refused.value.sentence == "Your keel account is deactivated: ask an administrator."
    assert names(erin) == ["managers"]


def test_the_admin_and_the_audit_name_the_subject(roles):
    frank = identity_sign_in(issuer=ISSUER, claims={"sub": "s-6", "preferred_username": "frank"})
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    client.force_login(root)
    page = client.get(f"/admin/auth/user/{frank.pk}/change/").content.decode()
    assert f"signed in through {ISSUER} as s-6" in page
    found = client.get("/admin/accounts/identity/?q=s-6").content.decode()
    assert "frank" in found
    line = Template("{% load identities %}{{ a }}{{ a|signed_in_through }} {{ b }}{{ b|signed_in_through }}")
    said = line.render(Context({"a": "user:frank", "b": "user:root"}))
    assert said == f"user:frank (signed in through {ISSUER} as s-6) user:root"


def test_the_approval_story_names_each_sso_actors_subject_in_one_query(roles, people, settings):
    """The audit story reads every actor's identity at once (``described_actors``), however
    many entries name them."""
    settings.KEEL_WORKFLOW_ACCESS = {}  # the story of an open workflow
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from approvals import audit
    from approvals.models import AuditEntry
    from tests.support.screens import logged_in, make_gate

    frank = identity_sign_in(issuer=ISSUER, claims={"sub": "s-7", "preferred_username": "frank"})
    request = make_gate(people)
    auditor = logged_in(people["auditor"])

    def story() -> tuple[str, int]:
        with CaptureQueriesContext(connection) as captured:
            page = auditor.get(f"/approvals/audit/{request.pk}/").content.decode()
        return page, len(captured)

    audit.record(AuditEntry.Kind.VIEWED, request=request, actor=frank, artifact_version=request.version)
    page, before = story()
    assert f"frank (signed in through {ISSUER} as s-7)" in page
    for _ in range(5):
        audit.record(AuditEntry.Kind.VIEWED, request=request, actor=frank, artifact_version=request.version)
    page, after = story()
    assert page.count(f"(signed in through {ISSUER} as s-7)") == 6 and after == before
