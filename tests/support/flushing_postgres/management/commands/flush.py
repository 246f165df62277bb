"""Django's ``flush`` for the pytest process (this package is an app in
config/test_settings.py, so its command replaces Django's): it skips the post_migrate
signal when the tables it refills are exactly as the last post_migrate left them.

After every transactional test the flush's post_migrate checked, app by app, that
every content type and permission exists (~60 queries, ~35 ms, some 600 times a run);
the fast flush keeps those two tables, so it found them all. Comparing a digest of
both tables with the one taken after the last post_migrate is one query; on any
difference (a test deleted or renamed one) post_migrate runs as before.
"""

from __future__ import annotations

from django.core.management.commands import flush
from django.db import DEFAULT_DB_ALIAS, connections


class Command(flush.Command):
    def handle(self, **options):
        connection = connections[options.get("database") or DEFAULT_DB_ALIAS]
        refill = not options.get("inhibit_post_migrate", False)
        ours = hasattr(connection, "kept_as_post_migrate_left_them")  # not another alias's backend
        # (Django's flush resets the sequences unless told not to, as pytest-django does.)
        flush = {
            "reset_sequences": options.get("reset_sequences", True),
            "allow_cascade": options.get("allow_cascade", False),
        }
        if refill and ours and connection.kept_as_post_migrate_left_them(**flush):
            options["inhibit_post_migrate"] = True
        super().handle(**options)
        if refill and ours and not options.get("inhibit_post_migrate"):
            connection.post_migrate_ran()
