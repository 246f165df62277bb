"""S62: single sign-on through a real OpenID provider (node-oidc-provider), Chromium signing in.

keel's web server runs as a process of its own with ``OIDC_*`` set and password sign-in off;
the provider runs as another (tests/support/oidc_provider/), its issuer the address of a
tampering proxy in the pytest process that passes everything on unchanged — or, in a mode,
rewrites the ID token the token endpoint answers. The user's groups follow the provider's
at every sign-in; every token a check must refuse is refused, with nothing written and one
log line naming the reason.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from playwright.sync_api import Page, expect

from accounts.models import Identity
from accounts.roles import ensure_roles
from accounts.tokens import api_token_create
from config.login import PASSWORD_LOGIN_OFF
from tests.support.oidc_provider import Accounts, Provider, TamperingProxy, signing_key
from tests.support.procs import Proc, free_port, http, wait_for

pytestmark = pytest.mark.browser

CLIENT_ID = "keel-dashboard"
CLIENT_SECRET = "client-secret-" + uuid.uuid4().hex
ROLE_MAP = {"keel-managers": "managers", "keel-operators": "operators"}
# The provider's own pages (any password does) and what keel says when it refuses.
REFUSED = "the provider's answer could not be trusted"
REFUSAL_LINE = re.compile(r"WARNING accounts\.sso single sign-on refused: (.*)")
WARNINGS = re.compile(r"^\S+ \S+ (WARNING|ERROR|CRITICAL) ", re.MULTILINE)


def sso_env(issuer: str) -> dict[str, str]:
    return {
        "OIDC_ISSUER": issuer,
        "OIDC_CLIENT_ID": CLIENT_ID,
        "OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "OIDC_ROLE_MAP": json.dumps(ROLE_MAP),
        "OIDC_SCOPES": "openid profile email groups",
        "KEEL_PASSWORD_LOGIN": "off",
    }


@dataclass
class SSO:
    web: str  # keel's address
    web_proc: Proc
    proxy: TamperingProxy
    accounts: Accounts

    def refusals(self) -> list[str]:
        return REFUSAL_LINE.findall(self.web_proc.output())

    def warnings(self) -> int:
        return len(WARNINGS.findall(self.web_proc.output()))


@pytest.fixture(scope="module")
def provider_key():
    return signing_key()


@pytest.fixture(scope="module")
def proxy(provider_key):
    proxy = TamperingProxy(client_id=CLIENT_ID, key=provider_key)
    yield proxy
    proxy.close()


@pytest.fixture(scope="module")
def providers(tmp_path_factory, provider_key, proxy):
    """The module's provider, (re)started for the callback of the web server that runs."""
    tmp = tmp_path_factory.mktemp("oidc")
    accounts = Accounts(tmp / "accounts.json")
    running: dict[str, Provider] = {}

    def for_callback(redirect_uri: str) -> Provider:
        current = running.get("provider")
        if current is None or current.redirect_uri != redirect_uri or not current.proc.alive():
            if current is not None:
                current.close()
            running["provider"] = Provider(
                tmp,
                issuer=proxy.url,
                client_id=CLIENT_ID,
                client_secret=CLIENT_SECRET,
                redirect_uri=redirect_uri,
                key=provider_key,
                accounts=accounts,
            )
        return running["provider"]

    yield accounts, for_callback
    if "provider" in running:
        running["provider"].close()


@pytest.fixture
def sso(stack, proxy, providers) -> SSO:
    """keel's web server with single sign-on through the proxy, the provider behind it."""
    ensure_roles()  # the groups and their permissions, as the data migration makes them
    accounts, for_callback = providers
    up = stack.up(web=True, beat=False, workers=0, web_env=sso_env(proxy.url))
    proxy.target = for_callback(f"{stack.web_url}/oidc/callback/").port
    proxy.mode = "pass"
    return SSO(web=stack.web_url, web_proc=up.web, proxy=proxy, accounts=accounts)


def new_page(browser) -> Page:
    context = browser.new_context()
    # The provider's development pages import a web font: nothing leaves the machine.
    context.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), lambda route: route.abort())
    return context.new_page()


def sign_in(page: Page, sso: SSO, subject: str) -> None:
    """From keel's login page through the provider's own pages (its sign-in form and consent,
    as far as it asks) until the browser is back on keel."""
    page.goto(f"{sso.web}/login/")
    with page.expect_navigation():
        page.locator("#sso-login").click()
    for _ in range(4):
        if page.url.startswith(sso.web + "/"):
            return
        with page.expect_navigation():
            if page.locator("input[name=login]").count():
                page.locator("input[name=login]").fill(subject)
                page.locator("input[name=password]").fill("any password")
                page.get_by_role("button", name="Sign-in").click()
            else:
                page.get_by_role("button", name="Continue").click()
    raise AssertionError(f"not back on keel: {page.url}\n{page.content()[:2000]}")


def groups_of(user) -> list[str]:
    return sorted(user.groups.values_list("name", flat=True))


def test_s62_groups_follow_the_provider_at_every_login(sso, browser):
    """S62: Chromium signs in through the provider as a member of "keel-managers" and
    "support": the user lands signed in, a manager, with an identity naming the provider's
    subject (the username is the provider's preferred_username). The provider removes
    "keel-managers"; signed out and in again, the same user is no longer a manager — a
    group an administrator gave in keel stays. Password sign-in is off: no password field,
    a password posted to /login/ or /admin/login/ is refused, a bearer token still works."""
    User = get_user_model()
    subject = "c0ffee-" + uuid.uuid4().hex[:8]
    sso.accounts.set(
        subject,
        preferred_username="alice",
        email="alice@example.com",
        email_verified=True,
        groups=["keel-managers", "support"],
    )
    page = new_page(browser)
    sign_in(page, sso, subject)
    expect(page.get_by_role("heading", name="Executions")).to_be_visible()
    expect(page.locator(".who")).to_contain_text("alice")
    expect(page.locator(".who .role")).to_have_text(["managers"])
    alice = User.objects.get(username="alice")
    assert groups_of(alice) == ["managers"]  # "support" maps to nothing keel manages
    assert (alice.identity.issuer, alice.identity.subject) == (sso.proxy.url, subject)
    assert alice.email == "alice@example.com" and not alice.has_usable_password()
    alice.groups.add(Group.objects.get_or_create(name="on-call")[0])  # by an administrator, in keel

    # The provider takes alice out of keel-managers (and changes her address).
    sso.accounts.set(
        subject, preferred_username="alice", email="alice@new.example.com", groups=["support", "keel-operators"]
    )
    with page.expect_navigation():
        page.get_by_role("button", name="Log out").click()
    assert page.url.startswith(f"{sso.web}/login/")
    sign_in(page, sso, subject)
    expect(page.get_by_role("heading", name="Executions")).to_be_visible()
    assert sorted(page.locator(".who .role").all_text_contents()) == ["on-call", "operators"]
    alice = User.objects.get(pk=alice.pk)
    assert groups_of(alice) == ["on-call", "operators"]
    assert alice.email == "alice@new.example.com"
    assert Identity.objects.count() == 1 and User.objects.filter(identity__subject=subject).get() == alice

    # Password sign-in is off: the page offers the provider alone, and a password is refused.
    page.context.clear_cookies()
    page.goto(f"{sso.web}/login/")
    expect(page.locator("#sso-login")).to_be_visible()
    assert page.locator("input[type=password]").count() == 0
    User.objects.create_user("pat", password="a-correct-password-1")
    for path in ("/login/", "/admin/login/"):
        session = http()
        session.get(f"{sso.web}/login/", timeout=10)  # the CSRF cookie
        answer = session.post(
            f"{sso.web}{path}",
            data={
                "username": "pat",
                "password": "a-correct-password-1",
                "csrfmiddlewaretoken": session.cookies["csrftoken"],
            },
            timeout=10,
            allow_redirects=False,
        )
        assert answer.status_code == (403 if path == "/login/" else 200), path
        assert PASSWORD_LOGIN_OFF in answer.text.replace("&#x27;", "'"), path
        assert "sessionid" not in session.cookies, path
    admin = http().get(f"{sso.web}/admin/login/?next=/admin/", timeout=10, allow_redirects=False)
    assert admin.status_code == 302 and admin.headers["Location"] == "/login/?next=/admin/"
    # API bearer tokens are no sign-in: unaffected.
    api = http(api_token_create(user=alice)).get(f"{sso.web}/api/executions", timeout=10)
    assert api.status_code == 200, api.text
    assert sso.refusals() == []


# The token endpoint's ID token as the proxy rewrites it, and the reason keel's log gives.
TAMPERED = {
    "audience": "the ID token is for 'another-client', not this client 'keel-dashboard'",
    "audiences": "not for this client 'keel-dashboard' alone",
    "issuer": "the ID token was issued by 'http://127.0.0.1:9/another-issuer'",
    "key": "the ID token's signature does not verify with the provider's key 'provider-key'",
    "nonce": "the ID token's nonce is not the one this sign-in sent",
    "expired": "the ID token expired at",
}


@pytest.mark.parametrize("mode", sorted(TAMPERED))
def test_a_tampered_id_token_is_refused_and_nothing_is_written(sso, browser, mode):
    """An ID token for another audience (or several, without azp naming keel), from another
    issuer, signed by another key, with another nonce or expired: the real callback and code
    exchange refuse it; the browser is on the login page with a sentence, no user, identity
    or session was made, and the web server wrote one log line, naming the reason."""
    User = get_user_model()
    subject = f"mallory-{mode}"
    sso.accounts.set(subject, preferred_username=subject, email=f"{subject}@example.com", groups=["keel-managers"])
    users, warnings, tampered = User.objects.count(), sso.warnings(), sso.proxy.tampered
    sso.proxy.mode = mode
    page = new_page(browser)
    sign_in(page, sso, subject)
    assert page.url == f"{sso.web}/login/"
    expect(page.locator(".msg.error")).to_contain_text(REFUSED)
    assert sso.proxy.tampered == tampered + 1, "the proxy rewrote no token: nothing was tested"
    assert User.objects.count() == users and not Identity.objects.exists()
    [reason] = sso.refusals()[-1:]
    assert TAMPERED[mode] in reason, reason
    assert sso.warnings() == warnings + 1, sso.web_proc.output()[-3000:]
    page.goto(f"{sso.web}/")
    assert page.url.startswith(f"{sso.web}/login/"), "signed in after all"


def test_a_refused_sign_in_leaves_a_known_users_groups_alone(sso, browser):
    """A manager whose provider dropped "keel-managers" signs in with an expired token: refused,
    still a manager, the identity's last sign-in unchanged; with a good token, no longer one."""
    User = get_user_model()
    sso.accounts.set("bob-1", preferred_username="bob", email="bob@example.com", groups=["keel-managers"])
    sign_in(new_page(browser), sso, "bob-1")
    bob = User.objects.get(identity__subject="bob-1")
    assert groups_of(bob) == ["managers"]
    last = bob.identity.signed_in_at

    sso.accounts.set("bob-1", preferred_username="bob", email="bob@example.com", groups=[])
    sso.proxy.mode = "expired"
    page = new_page(browser)
    sign_in(page, sso, "bob-1")
    expect(page.locator(".msg.error")).to_contain_text(REFUSED)
    bob = User.objects.get(pk=bob.pk)
    assert groups_of(bob) == ["managers"] and bob.identity.signed_in_at == last

    sso.proxy.mode = "pass"
    sign_in(new_page(browser), sso, "bob-1")
    assert groups_of(User.objects.get(pk=bob.pk)) == []


def test_keel_starts_while_the_provider_is_down_and_its_login_page_says_so(stack):
    """With nothing answering at OIDC_ISSUER, keel starts and draws its login page; the
    provider's button brings the login page back with a sentence (never a 500), and one line."""
    issuer = f"http://127.0.0.1:{free_port()}"
    up = stack.up(web=True, beat=False, workers=0, web_env=sso_env(issuer))
    session = http()
    page = session.get(f"{stack.web_url}/login/", timeout=10)
    assert page.status_code == 200 and 'id="sso-login"' in page.text
    answer = session.get(f"{stack.web_url}/oidc/authenticate/", timeout=30)
    assert answer.status_code == 200 and answer.url == f"{stack.web_url}/login/"
    assert "can&#x27;t be reached right now" in answer.text
    wait_for(lambda: REFUSAL_LINE.search(up.web.output()), timeout=5, what="the refusal's line")
    [reason] = REFUSAL_LINE.findall(up.web.output())
    assert "discovery document" in reason and "could not be read" in reason
    assert len(WARNINGS.findall(up.web.output())) == 1
