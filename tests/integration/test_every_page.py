"""Every page and live partial, in every state, as every role (issue 13's crawl test),
and an accessibility check of the main pages with axe-core.

The states are built once for the module (``tests/support/world.py``: real workers,
beat and sandbox with its faults). The crawl reads the URL patterns from the
urlconf, fills their parameters from what was built, GETs each one, and follows the
``hx-get`` attributes and same-site links it finds, so new pages and partials are
crawled without editing this file. A page fails on any 5xx, on an exception (the
test settings make a template that prints an unknown variable raise), or on an HTML
response without the Content-Security-Policy.

Not crawled: Django's admin (staff only; its own templates print unresolved
variables, which Django documents as harmless for them) and ``/logout/``.
"""

from __future__ import annotations

import html
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connections, transaction
from django.template import TemplateSyntaxError, engines
from django.test import Client
from django.urls import URLResolver, get_resolver, reverse

from accounts.roles import ensure_roles
from approvals.models import ApprovalRequest
from artifacts.models import ArtifactVersion
from config.csp import HEADER
from executions.authoring import registry
from executions.models import Action, Execution, Status
from schedules.models import Schedule
from tests.support.procs import wait_for
from tests.support.stack import Stack, pk
from tests.support.world import Account, build_world, make_people

# Each test runs in a transaction rolled back at its end (what the crawl writes, e.g. "viewed"
# audit entries, goes away); the world it reads was committed before, once for the module.
pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "requester", "manager", "operator", "auditor", "outsider"]
EXCLUDED_NAMESPACES = {"admin"}
NOT_FOLLOWED = ("/logout/", "/static/", "/admin/")
MAX_REQUESTS_PER_ROLE = 5000

EXPECTED_STATUS = {
    "report_awaiting_approval": {Status.AWAITING_APPROVAL},
    "report_completed": {Status.COMPLETED},
    "report_retrying": {Status.RETRY_PENDING},
    "report_permission_denied": {Status.NEEDS_ATTENTION},
    "report_failed": {Status.FAILED},
    "report_unknown_outcome": {Status.NEEDS_ATTENTION},
    "report_resolved": {Status.COMPLETED},
    "report_cancelled": {Status.CANCELLED},
    "report_rejected": {Status.CANCELLED},
    "report_superseded_by_redraft": {Status.AWAITING_APPROVAL},
    "report_changes_requested": {Status.AWAITING_APPROVAL},
    "report_approval_expired": {Status.NEEDS_ATTENTION},
    "report_pending": {Status.PENDING},
    "order_awaiting_approval": {Status.AWAITING_APPROVAL},
    "order_completed": {Status.COMPLETED},
    "order_unknown_outcome": {Status.NEEDS_ATTENTION},
    # After "it happened" the workflow goes on; where it ends is the resolve procedure's business.
    "order_resolved": {Status.COMPLETED, Status.FAILED, Status.NEEDS_ATTENTION},
    "order_submitted_then_retrying": {Status.RETRY_PENDING},
    "order_rejected": {Status.CANCELLED},
    "order_approval_expired": {Status.CANCELLED},
    "order_waiting": {Status.WAITING},  # v2: waits for the shipment confirmation
    "order_waiting_overdue": {Status.NEEDS_ATTENTION},  # the confirmation did not come in time
}


@dataclass
class World:
    stack: Stack
    people: dict[str, Account]
    refs: dict[str, str]


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory, run_sandbox, shared_stacks):
    """Built once; the database is emptied afterwards, as a transactional test leaves it."""
    with django_db_blocker.unblock():
        shared_stacks.close()  # the world's workers are the only ones
        run_sandbox.reset()
        stack = Stack(tmp_path_factory.mktemp("world"), run_sandbox)
        try:
            try:
                refs = build_world(stack, people := make_people())
            except BaseException:
                print(stack.logs())
                raise
            yield World(stack=stack, people=people, refs=refs)
        finally:
            stack.close()
            connections.close_all()
            call_command("flush", interactive=False, verbosity=0)
            ensure_roles()


# --- What the crawl visits ------------------------------------------------------------


def named_patterns() -> list[tuple[str, frozenset[str]]]:
    """(namespaced name, URL parameters) of every pattern outside the excluded namespaces."""
    found, unnamed = [], []

    def walk(patterns, namespaces: list[str], inherited: frozenset[str]) -> None:
        for p in patterns:
            params = inherited | frozenset(p.pattern.regex.groupindex)
            if isinstance(p, URLResolver):
                if p.namespace not in EXCLUDED_NAMESPACES:
                    walk(p.url_patterns, [*namespaces, p.namespace] if p.namespace else namespaces, params)
            elif p.name:
                found.append((":".join([*namespaces, p.name]), params))
            else:
                unnamed.append(str(p.pattern))

    walk(get_resolver().url_patterns, [], frozenset())
    assert not unnamed, f"name these URL patterns so the crawl can reverse them: {unnamed}"
    return found


def parameter_sets(refs: dict[str, str]) -> list[list[dict]]:
    """What fills URL parameters, by kind of object; a pattern uses the first kind that has all its names."""
    executions = list(Execution.objects.filter(pk__in=[pk(r) for r in refs.values()]))
    mine = {e.pk for e in executions}
    approvals = ApprovalRequest.objects.filter(execution_id__in=mine)
    versions = ArtifactVersion.objects.filter(artifact__execution_id__in=mine).select_related("artifact")
    actions = Action.objects.filter(execution_id__in=mine)
    return [
        [{"ref": e.ref, "execution_id": e.ref} for e in executions],
        [{"pk": a.pk, "approval_id": a.pk, "ref": a.execution.ref, "execution_id": a.execution.ref} for a in approvals],
        [
            {
                "artifact_ref": v.artifact.ref,
                "artifact_id": v.artifact.ref,
                "number": v.number,
                "n": v.number,
                "ref": v.artifact.execution.ref,
            }
            for v in versions
        ],
        [{"key": a.key, "ref": a.execution.ref, "execution_id": a.execution.ref} for a in actions],
        [{"workflow": name, "name": name} for name in registry.names()],  # the catalogue, the start forms (issue 20)
        # Deleting a schedule (POST/DELETE only): the crawl's GET must answer without a server error.
        [{"schedule_id": s.pk} for s in Schedule.objects.all()] or [{"schedule_id": 1}],
    ]


def seed_urls(refs: dict[str, str]) -> dict[str, list[str]]:
    """Every named pattern → the URLs that fill it with what was built (at least one each)."""
    sets = parameter_sets(refs)
    urls, unfilled = {}, []
    for name, params in named_patterns():
        if not params:
            urls[name] = [reverse(name)]
            continue
        kind = next((records for records in sets if records and params <= set(records[0])), None)
        if kind is None:
            unfilled.append((name, sorted(params)))
            continue
        urls[name] = list(dict.fromkeys(reverse(name, kwargs={k: r[k] for k in params}) for r in kind))
    assert not unfilled, f"teach the crawl (parameter_sets) how to fill these URL parameters: {unfilled}"
    return urls


HX_GET = re.compile(r"""\shx-get\s*=\s*(["'])(.*?)\1""", re.S)
HREF = re.compile(r"""\shref\s*=\s*(["'])(.*?)\1""", re.S)


def followed(page: str) -> list[tuple[str, bool]]:
    """(url, is a live partial) for each hx-get and each same-site link in ``page``."""
    out = [(html.unescape(m.group(2)), True) for m in HX_GET.finditer(page)]
    out += [(html.unescape(m.group(2)).split("#")[0], False) for m in HREF.finditer(page)]
    return [(u, partial) for u, partial in out if u.startswith("/") and not u.startswith("//") and u]


@dataclass
class Crawl:
    visited: dict[str, int]  # url → status
    partials: set[str]
    failures: list[str]
    pages: list[str] = field(default_factory=list)  # whole HTML pages answered 200, in crawl order


def crawl(client: Client, seeds: list[str]) -> Crawl:
    queue = deque((url, False) for url in seeds)
    result = Crawl(visited={}, partials=set(), failures=[])
    while queue and len(result.visited) < MAX_REQUESTS_PER_ROLE:
        url, partial = queue.popleft()
        if url in result.visited or url.startswith(NOT_FOLLOWED):
            continue
        headers = {"HTTP_HX_REQUEST": "true"} if partial else {}
        try:
            response = client.get(url, **headers)
        except Exception as exc:  # a template error, a bug in a view: the crawl's finding
            result.visited[url] = 500
            result.failures.append(f"GET {url}: {type(exc).__name__}: {exc}")
            continue
        result.visited[url] = response.status_code
        if partial:
            result.partials.add(url)
        if response.status_code >= 500:
            result.failures.append(f"GET {url}: {response.status_code}")
        if response.get("Content-Type", "").startswith("text/html"):
            if response.status_code == 200 and not partial and b"<html" in response.content[:300]:
                result.pages.append(url)  # a whole page (a live partial followed as a link is not one)
            if HEADER not in response:
                result.failures.append(f"GET {url}: HTML without a Content-Security-Policy")
            queue.extend(followed(response.content.decode()))
    assert len(result.visited) < MAX_REQUESTS_PER_ROLE, "the crawl did not converge: links generate new URLs"
    return result


def client_for(world: World, role: str) -> Client:
    client = Client()
    if role != "anonymous":
        client.force_login(world.people[role].user)
    return client


# --- Tests ------------------------------------------------------------------------


def test_templates_in_tests_fail_on_an_unknown_variable():
    """What makes "no template error" checkable: the test settings' string_if_invalid raises."""
    engine = engines["django"]
    with pytest.raises(TemplateSyntaxError, match=r"\{\{ nope \}\}"):
        engine.from_string("<p>{{ nope }}</p>").render({})
    assert engine.from_string("{% if nope %}x{% endif %}{{ nope|default:'d' }}").render({}) == "d"


def test_the_world_holds_every_state(world):
    """Both workflows, every state they reach, built by real workers and the sandbox's faults."""
    statuses = {name: Execution.objects.get(pk=pk(ref)).status for name, ref in world.refs.items()}
    assert set(statuses) == set(EXPECTED_STATUS)
    wrong = {name: s for name, s in statuses.items() if s not in EXPECTED_STATUS[name]}
    assert not wrong, wrong
    refs = world.refs
    assert Action.objects.get(key=f"{refs['report_unknown_outcome']}:publish:v1").status == "unknown"
    assert Action.objects.get(key=f"{refs['order_unknown_outcome']}:submit_order:v1").status == "unknown"
    assert Action.objects.get(key=f"{refs['order_submitted_then_retrying']}:submit_order:v1").status == "succeeded"
    assert Execution.objects.get(pk=pk(refs["order_waiting_overdue"])).reason_code == "waiting_overdue"
    assert Action.objects.get(key=f"{refs['report_resolved']}:publish:v1").receipt["resolved_by"] == "operator"
    superseded = ApprovalRequest.objects.filter(execution_id=pk(refs["report_superseded_by_redraft"]))
    assert sorted(superseded.values_list("version", "status")) == [(1, "superseded"), (2, "pending")]
    changes = ApprovalRequest.objects.filter(execution_id=pk(refs["report_changes_requested"]))
    assert sorted(changes.values_list("version", "status")) == [(1, "changes_requested"), (2, "pending")]
    assert ApprovalRequest.objects.filter(execution_id=pk(refs["report_approval_expired"]), status="expired").exists()


_CRAWLS: dict[tuple[int, str], Crawl] = {}


def crawled(world: World, role: str) -> Crawl:
    """The crawl of the world as ``role``, once per module (the phone test reads the manager's)."""
    key = (id(world), role)
    if key not in _CRAWLS:
        # Rolled back to a savepoint at once: what the crawl wrote (a login's last_login, "viewed"
        # entries) and the row locks it took go, so a browser of the same test logs in unblocked.
        with transaction.atomic():
            _CRAWLS[key] = crawl(client_for(world, role), [u for urls in seed_urls(world.refs).values() for u in urls])
            transaction.set_rollback(True)
    return _CRAWLS[key]


@pytest.mark.parametrize("role", ROLES)
def test_every_page_and_live_partial_answers_without_a_server_error(world, role):
    """Issue 13: no 5xx and no template error on any page or partial, in any state, for any role."""
    seeds = seed_urls(world.refs)
    result = crawled(world, role)
    assert not result.failures, "\n".join(result.failures)
    # The crawl really went everywhere: each pattern with every object that fills it.
    missed = [u for urls in seeds.values() for u in urls if u not in result.visited and not u.startswith(NOT_FOLLOWED)]
    assert not missed, missed
    if role == "anonymous":
        return
    assert result.partials, "no hx-get partial found on any page"
    ok = [url for url, status in result.visited.items() if status == 200]
    assert len(ok) > 50, f"only {len(ok)} pages answered 200 for {role}"


def story(world: World, name: str, role: str = "auditor") -> str:
    """The audit story of the state's first approval request, as ``role`` sees it."""
    request = ApprovalRequest.objects.filter(execution_id=pk(world.refs[name])).order_by("id").first()
    response = client_for(world, role).get(f"/approvals/audit/{request.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def after_decision(page: str) -> str:
    return page.split('id="after-decision"')[1].split("</section>")[0]


def test_the_audit_tells_what_followed_each_decision(world):
    """Issue 13: the effect's outcome after each decision, from the ledger and the events."""
    refs = world.refs
    done = after_decision(story(world, "report_completed"))
    assert f"{refs['report_completed']}:publish:v1" in done and "succeeded" in done
    assert re.search(r"publication_id <code>PUB-\w+</code>", done)
    assert f"{refs['report_completed']}:notify:v1" in done and "a later step" in done
    order = after_decision(story(world, "order_completed"))
    assert re.search(r"order_id <code>[\w-]+</code>", order) and "succeeded" in order

    unknown = after_decision(story(world, "report_unknown_outcome"))
    assert "outcome unknown" in unknown and "Lookup:" in unknown and "lookup_error" in unknown
    resolved = after_decision(story(world, "report_resolved"))
    assert "succeeded (resolved by operator)" in resolved
    assert "Resolved as succeeded by operator" in resolved and "PUB found on the report portal" in resolved
    assert "outcome unknown" not in resolved  # worded as it ended, the lookup kept as evidence
    assert "retrying (attempt 1 did not succeed)" in after_decision(story(world, "report_retrying"))
    rejected = after_decision(story(world, "report_rejected"))
    assert "not run: approval" in rejected and "rejected" in rejected and ">failed<" not in rejected
    assert "Not decided yet" in after_decision(story(world, "order_awaiting_approval"))

    # The same section on the approval page, for the manager who decided.
    request = ApprovalRequest.objects.get(execution_id=pk(refs["report_resolved"]))
    page = client_for(world, "manager").get(f"/approvals/{request.pk}/").content.decode()
    assert "Resolved as succeeded by operator" in after_decision(page)

    # The history: one line per request with the outcome of what it unlocked.
    history = client_for(world, "auditor").get("/approvals/audit/?workflow=replacement_order").content.decode()
    row = history[history.index(f">{refs['order_completed']}<") :].split("</tr>")[0]
    assert "succeeded" in row and "ORD-" in row


def test_a_proposal_reads_as_an_order_on_the_approval_page(world):
    request = ApprovalRequest.objects.get(execution_id=pk(world.refs["order_awaiting_approval"]), status="pending")
    page = client_for(world, "manager").get(f"/approvals/{request.pk}/").content.decode()
    rendered = page.split('class="rendered"')[1]
    for text in ("Ana Pereira", "Stoneware mug, blue", "43.90 EUR", "Rua das Flores 12", "Shipping address"):
        assert text in rendered, text
    details = rendered.split('<details class="canonical-json">')[1].split("</details>")[0]
    assert request.content_sha256 in details and "&quot;original_order&quot;: &quot;ORD-1001&quot;" in details


# --- Accessibility ----------------------------------------------------------------

AXE = Path(__file__).resolve().parents[1] / "vendor" / "axe-core" / "axe.min.js"


@pytest.fixture(scope="module")
def web(world):
    world.stack.web()
    return world.stack.web_url


def axe_violations(page, url: str) -> list[str]:
    """Serious and critical axe-core violations of the page at ``url``."""
    page.goto(url)
    page.wait_for_load_state("networkidle")
    return axe_run(page, url)


def axe_run(page, where: str) -> list[str]:
    """Serious and critical axe-core violations of the page as it is now."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    results = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    url = where
    return [
        f"{url}: {v['id']} ({v['impact']}): {v['help']} — "
        + "; ".join(n["target"][0] if isinstance(n["target"][0], str) else str(n["target"]) for n in v["nodes"][:5])
        for v in results["violations"]
        if v["impact"] in ("serious", "critical")
    ]


PHONE = {"width": 390, "height": 844}
# The widest thing on the page that sticks out past the screen's right edge without a
# scrolling box of its own between it and the page (what makes the page scroll sideways).
STICKING_OUT = """() => {
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.getBoundingClientRect().right <= innerWidth + 1) continue;
    let box = el.parentElement, held = false;
    for (; box && box !== document.body; box = box.parentElement) {
      if (getComputedStyle(box).overflowX !== 'visible' && box.getBoundingClientRect().right <= innerWidth + 1) { held = true; break; }
    }
    if (!held) out.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : ''));
  }
  return out.slice(0, 3);
}"""


def logged_in(browser, web: str, world: World, role: str, **context):
    """A browser page of a fresh context, logged in as ``role`` through the login form."""
    page = browser.new_context(**context).new_page()
    page.goto(f"{web}/login/")
    page.get_by_label("Username").fill(role)
    page.get_by_label("Password").fill(world.people[role].password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{web}/")
    return page


def test_every_page_of_a_manager_fits_a_phone(world, web, browser):
    """Issue 39, item 9: every page the crawl reaches as a manager, each URL pattern in up to
    three of the world's states, at 390 px wide in Chromium: the page is never wider than the
    screen (a table, a diff or JSON may scroll inside its own box)."""
    role, wide = "manager", []
    by_pattern: dict[str, list[str]] = {}
    for url in crawled(world, role).pages:
        chosen = by_pattern.setdefault(get_resolver().resolve(url.split("?")[0]).route, [])
        if len(chosen) < 3:
            chosen.append(url)
    urls = [url for chosen in by_pattern.values() for url in chosen]
    assert len(by_pattern) >= 10 and any("approvals" in url for url in urls), by_pattern
    page = logged_in(browser, web, world, role, viewport=PHONE)
    for url in urls:
        page.goto(f"{web}{url}")
        over = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        if over > 0:
            wide.append(f"{url}: {over} px too wide ({', '.join(page.evaluate(STICKING_OUT))})")
    assert not wide, "\n".join(wide)


OPEN_EXECUTIONS_OPERATIONS = """
[...document.querySelectorAll('.opblock')]
  .filter(op => (op.querySelector('.opblock-summary-path')?.dataset.path || '').match(/^\\/api\\/executions(\\/\\{[a-z_]+\\})?(\\/[a-z_]+)?$/))
  .slice(0, 8)
  .forEach(op => op.querySelector('.opblock-summary-control').click())
"""


def test_the_api_docs_have_no_serious_accessibility_violations(world, web, browser):
    """Issue 39, item 15: /api/docs (Swagger UI, bundled) through axe — as loaded, then with
    the executions' operations opened and "Try it out" pressed (the selects, inputs and
    bodies Swagger draws then), on a desktop and on a phone (where it fits the screen too)."""
    found = []
    for viewport in ({"width": 1280, "height": 900}, PHONE):
        # Playwright injects axe as an inline script: only this test's context lifts the CSP.
        page = logged_in(browser, web, world, "manager", bypass_csp=True, viewport=viewport)
        page.goto(f"{web}/api/docs")
        page.wait_for_selector(".opblock-summary-control")  # Swagger UI drew the operations
        found += axe_run(page, f"{web}/api/docs ({viewport['width']} px)")
        # The executions' operations opened, then "Try it out" in each: query selects
        # (status, reason, hold), path inputs, JSON bodies, examples. Clicked in the page:
        # a Playwright click per button waits for each to be actionable, and all 37
        # opened made axe alone take a minute.
        page.evaluate(OPEN_EXECUTIONS_OPERATIONS)

        def count(selector: str, page=page) -> int:
            return page.evaluate(f"document.querySelectorAll({selector!r}).length")

        wait_for(lambda: count(".opblock.is-open .try-out__btn") >= 6, timeout=20, what="the operations open")
        page.evaluate("document.querySelectorAll('.try-out__btn').forEach(b => b.click())")
        wait_for(lambda: count(".try-out__btn.cancel") >= 6, timeout=20, what="the operations tried out")
        page.wait_for_timeout(300)  # the observer names what was just drawn
        assert page.locator("tr[data-param-name] select").count() >= 1, "no parameter select was drawn"
        found += axe_run(page, f"{web}/api/docs (opened, {viewport['width']} px)")
        over = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert over <= 0, f"/api/docs is {over} px wider than {viewport['width']} px"
        page.context.close()
    assert not found, "\n".join(found)


def test_main_pages_have_no_serious_accessibility_violations(world, web, browser):
    """axe-core (vendored from npm) on the list, execution, approval and audit pages."""
    refs = world.refs
    pending = ApprovalRequest.objects.get(execution_id=pk(refs["order_awaiting_approval"]), status="pending")
    decided = ApprovalRequest.objects.filter(execution_id=pk(refs["report_unknown_outcome"])).first()
    pages = {
        "manager": [
            "/",
            f"/executions/{refs['report_awaiting_approval']}/",
            f"/executions/{refs['order_completed']}/",
            f"/approvals/{pending.pk}/",
            f"/approvals/{decided.pk}/",
            "/approvals/inbox/",
        ],
        "operator": [f"/executions/{refs['report_unknown_outcome']}/", f"/executions/{refs['report_retrying']}/"],
        "auditor": ["/approvals/audit/", f"/approvals/audit/{decided.pk}/"],
    }
    found = []
    for role, urls in pages.items():
        # Playwright injects axe as an inline script: only this test's context lifts the CSP.
        page = logged_in(browser, web, world, role, bypass_csp=True)
        for url in urls:
            found += axe_violations(page, f"{web}{url}")
        page.context.close()
    assert not found, "\n".join(found)
