from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from executions.auth import api_token_create


class Command(BaseCommand):
    help = "Create a Task API bearer token for USERNAME; prints the token alone on the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}; create it first (manage.py createsuperuser or seed_demo)")
        if not user.is_active:
            raise CommandError(f"user {username!r} is inactive; tokens are only issued to active users")
        token = api_token_create(user=user)
        self.stderr.write(f"Token for {username} (shown once; store it safely):")
        self.stdout.write(token)
