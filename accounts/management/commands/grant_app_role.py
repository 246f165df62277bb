from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections

from accounts.database_roles import RoleError, app_role_grant


class Command(BaseCommand):
    help = (
        "Create (if missing) the PostgreSQL role the application runs as, and give it exactly its rights: "
        "SELECT and INSERT on the append-only tables, read and write on the others. Run as the owner, after migrate."
    )

    def add_arguments(self, parser):
        parser.add_argument("role", help="the application's role, e.g. keel_app")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)

    def handle(self, *args, role: str, database: str, **options):
        vendor = connections[database].vendor
        if vendor != "postgresql":
            self.stdout.write(
                f"The database is {vendor} (the embedded default): it has no roles; nothing to grant. "
                "Database roles apply to PostgreSQL (docs/operations.md, Security)."
            )
            return
        try:
            report = app_role_grant(role=role, using=database)
        except RoleError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"Role {report.role} {'created' if report.created else 'exists'}: "
            f"SELECT, INSERT on {len(report.append_only)} append-only tables ({', '.join(report.append_only)}); "
            f"SELECT, INSERT, UPDATE, DELETE on {len(report.read_write)} others; "
            f"SELECT on {', '.join(report.read_only) or 'none'}; no TRUNCATE anywhere."
        )
