"""Access by workflow (``KEEL_WORKFLOW_ACCESS``): who may read, start, decide and operate
each workflow, and the one place every person's read goes through.

``rules`` holds the rule: a workflow named in the setting belongs to the groups it lists;
one not named is open to everyone, as before. ``viewer`` holds who is looking: the web
request's user (``ViewerMiddleware``; the API's bearer token sets the same request's
user), the CLI's ``--as``. ``managers`` holds the enforcement: every model that holds or
belongs to an execution reads through ``Scoped``, which leaves out, while a person is
looking, the workflows that person may not read. So a restricted execution is absent from
every list, count and page built from the database, and answers 404 by id, without each
read asking. Workers, the sweeper and the shell look as no one: everything.

This package sits under every app (import-linter's layers): it knows settings and
Django's users, nothing of keel's own.
"""
