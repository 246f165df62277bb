"""``manage.py runsandbox``: run the sandbox services in the foreground.

Equivalent to ``python -m sandbox.server``; the server itself uses no Django.
"""

from django.core.management.base import BaseCommand

from sandbox.server import add_arguments, serve


class Command(BaseCommand):
    help = "Run the simulated external services (sandbox) HTTP server."

    def add_arguments(self, parser):
        add_arguments(parser)

    def handle(self, *args, **options):
        serve(
            host=options["host"],
            port=options["port"],
            db_path=options["db"],
            orders_idempotent=options["orders_mode"] == "idempotent",
        )
