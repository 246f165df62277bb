"""The command line: ``python manage.py keel COMMAND`` (docs/design.md §6, "Platform") — for the
operator who has a shell and no browser.

Each command is a module of ``cli.commands`` that registers itself (``cli.registry``);
``manage.py keel`` builds its parser from the registry, so a new command is one new
module there. A command is thin, like an API endpoint: it parses its arguments through
the API's own body schemas (so the CLI refuses exactly what the API refuses with 422),
calls the service the API calls — never a second way — and prints the API's JSON shape
(``--json``) or a few lines for people. ``--as USER`` acts with that user's authority and
is recorded as that user, like an API call, each event it wrote marked ``via.cli``
(``cli.trace``).

Exit status: 0 done; 2 bad input (usage, an unknown workflow, execution or user,
malformed JSON, a field the API would refuse with 422); 3 refused by the execution's
state (the API's 409); 4 not allowed (the API's 403). An error is one sentence on
stderr, never a traceback.

Who imports this package: nobody; it sits beside the console, above triage, approvals
and the runtime, and imports their services and selectors.
"""
