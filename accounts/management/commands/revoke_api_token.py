from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.tokens import TokenRefused, api_token_revoke, api_tokens_of


class Command(BaseCommand):
    help = "Revoke USERNAME's Task API tokens: all of them, or one by --id or --prefix (its first characters)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--id", type=int, dest="token_id", help="the token's id (create_api_token prints it)")
        which.add_argument("--prefix", help="the token's first characters, e.g. keel_AbC1234")

    def handle(self, *args, username: str, token_id: int | None, prefix: str | None, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        try:
            revoked = api_token_revoke(user=user, prefix=prefix, token_id=token_id)
        except TokenRefused as exc:
            left = api_tokens_of(user=user)
            listing = "; ".join(t.describe() for t in left) or "none"
            raise CommandError(f"{exc.message}; nothing revoked. {username}'s tokens: {listing}") from exc
        if not revoked:
            self.stdout.write(f"{username} has no API tokens; nothing to revoke.")
            return
        self.stdout.write(f"Revoked {len(revoked)} token(s) of {username}: " + "; ".join(t.describe() for t in revoked))
