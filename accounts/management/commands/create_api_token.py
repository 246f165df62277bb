from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.tokens import DEFAULT_DAYS, TokenRefused, api_token_issue


class Command(BaseCommand):
    help = (
        f"Create a Task API bearer token for USERNAME, valid --days days (default {DEFAULT_DAYS}); "
        "prints the token alone on the last line."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--days", type=int, default=DEFAULT_DAYS, help=f"validity in days (default {DEFAULT_DAYS})")

    def handle(self, *args, username: str, days: int, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}; create it first (manage.py createsuperuser or seed_demo)")
        if not user.is_active:
            raise CommandError(f"user {username!r} is inactive; tokens are only issued to active users")
        try:
            issued = api_token_issue(user=user, days=days)
        except TokenRefused as exc:
            raise CommandError(exc.message) from exc
        self.stderr.write(
            f"Token #{issued.id} for {username}, expires {issued.expires_at:%Y-%m-%d %H:%M} UTC "
            f"(shown once; store it safely; revoke with: manage.py revoke_api_token {username} --id {issued.id}):"
        )
        self.stdout.write(issued.token)
