"""Demo users (one per role plus a requester) and one demo execution, for ``make run``."""

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
    help = "Create demo users with fresh passwords (printed) and start one demo execution if none exists."

    def add_arguments(self, parser):
        parser.add_argument("--no-execution", action="store_true", help="only create the users")

    @transaction.atomic
    def handle(self, *args, no_execution: bool = False, **options):
        ensure_roles()
        User = get_user_model()
        lines = []
        for username, group, does in DEMO_USERS:
            user, _ = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.com"})
            password = secrets.token_urlsafe(9)
            user.set_password(password)
            user.save()
            if group:
                user.groups.add(Group.objects.get(name=group))
            lines.append(f"  {username:<10} {password:<14} {does}")
        text = "Demo users (passwords are new on every run):\n" + "\n".join(lines) + "\n"
        self.stdout.write(text, ending="")
        saved = settings.VAR_DIR / "demo-credentials.txt"
        saved.write_text(text)
        saved.chmod(0o600)
        self.stdout.write(f"(also saved in {saved})")
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
