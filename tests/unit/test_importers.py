"""What an app's docstring says imports it is true (issue 41): "Imported by a, b and c" in
a root package's ``__init__`` names exactly the apps that import it, and "never by x or
y" none that does; "Who imports this package: nobody" none at all. Read off the import
graph import-linter checks (grimp), so a new importer fails here until the sentence
says so."""

from __future__ import annotations

import importlib
import re

import grimp
import pytest

ROOTS = [
    "config",
    "cli",
    "console",
    "workflows",
    "metrics",
    "fleet",
    "retention",
    "notifications",
    "schedules",
    "triage",
    "approvals",
    "executions",
    "apikit",
    "accounts",
    "artifacts",
    "dblocks",
    "sandbox",
]


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph(*ROOTS)


def importers(graph, package: str) -> set[str]:
    """The root packages with a module that imports ``package`` or one of its modules."""
    found = set()
    for module in graph.modules:
        if module.split(".")[0] == package:
            continue
        if any(m == package or m.startswith(package + ".") for m in graph.find_modules_directly_imported_by(module)):
            found.add(module.split(".")[0])
    return found


def named(phrase: str) -> set[str]:
    return {word for word in re.findall(r"[a-z_]+", phrase) if word in ROOTS}


def claims() -> list[tuple[str, str, str]]:
    """(package, kind, phrase): every claim a root package's docstring makes."""
    found = []
    for package in ROOTS:
        doc = " ".join((importlib.import_module(package).__doc__ or "").split())
        for kind, pattern in (
            ("exactly", r"Imported by ([a-z_, ]+?(?: and [a-z_]+)?)[;.]"),
            ("never", r"never by ([a-z_, ]+?(?: or [a-z_]+)?)[;.]"),
            ("nobody", r"Who imports this package: (nobody)"),
        ):
            found += [(package, kind, m.group(1)) for m in re.finditer(pattern, doc)]
    return found


def test_the_claims_are_found():
    assert {(p, k) for p, k, _ in claims()} >= {("executions", "exactly"), ("triage", "exactly"), ("cli", "nobody")}


@pytest.mark.parametrize(("package", "kind", "phrase"), claims())
def test_each_claim_about_who_imports_an_app_is_true(graph, package, kind, phrase):
    actual = importers(graph, package)
    if kind == "exactly":
        assert named(phrase) == actual, (
            f"{package}: the docstring says {sorted(named(phrase))}, imported by {sorted(actual)}"
        )
    elif kind == "never":
        assert not named(phrase) & actual, f"{package} is imported by {sorted(named(phrase) & actual)}"
    else:
        assert not actual, f"{package} is imported by {sorted(actual)}"
