"""Issue 39, item 5: every ``make run-*`` runs ``seed_demo`` (``make prepare``); it used to give
every demo user a new password each time, so starting a second worker logged everyone out.
It now creates what is missing and changes nothing else."""

from __future__ import annotations

import io
import re

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client


def seed(*args: str) -> str:
    out = io.StringIO()
    call_command("seed_demo", "--no-execution", *args, stdout=out)
    return out.getvalue()


def test_a_second_seed_keeps_every_password_and_session(transactional_db, settings, tmp_path):
    """Issue 39, item 5: seeding again keeps the demo users' passwords and sessions and
    prints no password (it says where they are); ``--new-passwords`` still resets them."""
    settings.VAR_DIR = tmp_path
    first = seed()
    passwords = dict(re.findall(r"^  (\w+) +(\S+)", first, re.M))
    assert set(passwords) == {"requester", "manager", "operator", "auditor"}, first
    users = get_user_model().objects
    assert users.get(username="manager").check_password(passwords["manager"])
    manager = Client()
    manager.force_login(users.get(username="manager"))  # its session carries the password's hash
    assert manager.get("/").status_code == 200

    again = seed()
    assert manager.get("/").status_code == 200, "the manager's session survived the second seed"
    assert not any(p in again for p in passwords.values()), again
    assert "unchanged" in again and str(tmp_path / "demo-credentials.txt") in again
    assert all(users.get(username=u).check_password(p) for u, p in passwords.items())
    saved = (tmp_path / "demo-credentials.txt").read_text()
    assert all(f"  {u}" in saved and p in saved for u, p in passwords.items())

    reset = seed("--new-passwords")
    fresh = dict(re.findall(r"^  (\w+) +(\S+)", reset, re.M))
    assert set(fresh) == set(passwords) and not set(fresh.values()) & set(passwords.values())
    assert manager.get("/").status_code == 302, "a new password ends the old sessions"
