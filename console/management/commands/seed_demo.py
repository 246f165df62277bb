"""Demo users (one per role plus a requester) and the demo executions, for ``make run``.

Idempotent (issue 39, item 5): every ``make run-*`` runs it, so it creates what is missing
and changes nothing else. A user that exists keeps its password and its sessions; the
passwords of the users it creates are printed once and kept in
``$KEEL_VAR_DIR/demo-credentials.txt`` (0600). ``--new-passwords`` gives every demo user a
new one (and so logs them out)."""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.roles import ensure_roles
from executions.models import Execution
from executions.services import execution_start

DEMO_USERS = [
    ("requester", None, "starts executions"),
    ("manager", "managers", "approves report versions"),
    ("operator", "operators", "triages, resumes, cancels"),
    ("auditor", "auditors", "reads the approval history"),
]


class Command(BaseCommand):
    help = (
        "Create the demo users that are missing (their passwords printed once and saved) and start "
        "the demo executions if there is none; existing users keep their passwords and sessions."
    )

    def add_arguments(self, parser):
        parser.add_argument("--no-execution", action="store_true", help="only create the users")
        parser.add_argument(
            "--new-passwords", action="store_true", help="give every demo user a new password (logs them out)"
        )

    @transaction.atomic
    def handle(self, *args, no_execution: bool = False, new_passwords: bool = False, **options):
        ensure_roles()
        User = get_user_model()
        saved = settings.VAR_DIR / "demo-credentials.txt"
        lines = _saved_lines(saved)
        made = []
        for username, group, does in DEMO_USERS:
            user, created = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.com"})
            if group:
                user.groups.add(Group.objects.get(name=group))
            if not (created or new_passwords):
                continue  # its password, and so its sessions, stay as they are
            password = secrets.token_urlsafe(9)
            user.set_password(password)
            user.save()
            lines[username] = f"  {username:<10} {password:<14} {does}"
            made.append(lines[username])
        if made:
            saved.write_text("Demo users:\n" + "\n".join(lines.values()) + "\n")
            saved.chmod(0o600)
            self.stdout.write("Demo users (new passwords):\n" + "\n".join(made) + "\n", ending="")
            self.stdout.write(f"(also saved in {saved})")
        else:
            where = f"in {saved}" if saved.exists() else "as first printed (no credentials file under KEEL_VAR_DIR)"
            self.stdout.write(
                f"Demo users exist; their passwords are unchanged ({where}; `manage.py seed_demo --new-passwords` resets them)."
            )
        if not no_execution and not Execution.objects.exists():
            execution, _ = execution_start(
                user=User.objects.get(username="requester"),
                workflow="monthly_report",
                input={"month": "2026-08"},
                idempotency_key="demo-august-report",
            )
            self.stdout.write(f"Started demo execution {execution.ref}: the August report; it will wait for approval.")
            quarterly, _ = execution_start(
                user=User.objects.get(username="requester"),
                workflow="quarterly_report",
                input={"quarter": "2026-Q3"},
                idempotency_key="demo-q3-report",
            )
            self.stdout.write(
                f"Started demo execution {quarterly.ref}: the Q3 report; it starts three monthly reports and waits for them."
            )


def _saved_lines(saved) -> dict[str, str]:
    """The credentials file's user lines, by username (empty when there is none)."""
    try:
        text = saved.read_text()
    except OSError:
        return {}
    return {line.split()[0]: line for line in text.splitlines() if line.startswith("  ") and line.split()}
