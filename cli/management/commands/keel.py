"""``python manage.py keel COMMAND``: the parser built from ``cli.registry``, errors turned
into exit statuses and one sentence on stderr (cli/__init__.py)."""

from __future__ import annotations

import importlib
import pkgutil
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser, handle_default_options
from django.db import DatabaseError

from access.viewer import looking_as
from cli import commands as command_modules
from cli import trace
from cli.registry import Command as KeelCommand
from cli.registry import UsageError, as_json, get, groups
from executions.errors import Conflict, Forbidden, InvalidInput, NotFound, ServiceError

# Exit statuses (docs/design.md §6): 2 bad input, 3 refused by the state, 4 not allowed.
BAD_INPUT, REFUSED, NOT_ALLOWED, FAILED = 2, 3, 4, 1


class KeelParser(CommandParser):
    """A usage error is a CommandError with exit status 2 and one sentence, never argparse's
    usage dump (``--help`` still prints the usage)."""

    def error(self, message: str):
        raise CommandError(f"{self.prog}: {message} (see --help)", returncode=BAD_INPUT)


def _load_commands() -> None:
    for module in pkgutil.iter_modules(command_modules.__path__):
        importlib.import_module(f"{command_modules.__name__}.{module.name}")


def _exit_status(exc: ServiceError) -> int:
    if isinstance(exc, Forbidden):
        return NOT_ALLOWED
    if isinstance(exc, Conflict):
        return REFUSED
    return BAD_INPUT  # InvalidInput, NotFound, any other refusal of the input


def _sentence(exc: ServiceError) -> str:
    return exc.message  # an InvalidInput's names its field: "input.month: …"


class Command(BaseCommand):
    help = "keel's command line: workflows, start, list, show, cancel, resume, retry, signal, …"
    requires_system_checks = []  # an operator's command at 3 a.m.; `manage.py check` is the deploy's

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.__class__ = KeelParser  # its subparsers are made of the same class
        return parser

    def add_arguments(self, parser):
        _load_commands()
        sub = parser.add_subparsers(dest="keel_command", metavar="COMMAND", required=True, parser_class=KeelParser)
        for group in groups():
            p = sub.add_parser(group.name, help=group.help, description=group.help)
            if group.own:
                _declare(p, group.own)
            if group.subcommands:  # keel schedules add …, keel workflow pause …
                nested = p.add_subparsers(
                    dest="keel_subcommand", metavar="SUBCOMMAND", required=group.own is None, parser_class=KeelParser
                )
                for cmd in group.subcommands:
                    _declare(nested.add_parser(cmd.name.split()[1], help=cmd.help, description=cmd.help), cmd)

    def run_from_argv(self, argv):
        """Django's, with an error as one sentence (no class name, no traceback) and its status."""
        self._called_from_command_line = True
        try:
            parser = self.create_parser(argv[0], argv[1])
            options = parser.parse_args(argv[2:])
            cmd_options = vars(options)
            args = cmd_options.pop("args", ())
            handle_default_options(options)
            self.execute(*args, **cmd_options)
        except CommandError as exc:
            self.stderr.write(str(exc))
            sys.exit(exc.returncode)

    def handle(self, *args, **options):
        sub = options.get("keel_subcommand")
        cmd = get(f"{options['keel_command']} {sub}" if sub else options["keel_command"])
        try:
            if cmd.as_optional:  # reads as --as USER when given, else as the shell
                reader = _user(options["as_user"]) if options.get("as_user") else None
                with looking_as(reader):  # what --as may read (access by workflow), the shell everything
                    result = cmd.run(options, reader)
            elif cmd.acts:
                user = _user(options["as_user"])
                with looking_as(user):
                    if cmd.per_item:  # each item commits with its marks (cli.trace.acting, by the command)
                        result = cmd.run(options, user)
                    else:
                        with trace.acting(user=user, command=cmd.name):  # the act and its via.cli marks, together
                            result = cmd.run(options, user)
            else:
                result = cmd.run(options)
        except UsageError as exc:
            raise CommandError(str(exc), returncode=BAD_INPUT) from None
        except ServiceError as exc:
            raise CommandError(_sentence(exc), returncode=_exit_status(exc)) from None
        except DatabaseError as exc:
            raise CommandError(f"the database answered with an error: {str(exc).strip()}", returncode=FAILED) from None
        if options["json"]:
            self.stdout.write(as_json(result.data))
        else:
            for line in result.lines:
                self.stdout.write(line)
        if result.error:
            self.stderr.write(result.error)
        if result.exit:
            raise SystemExit(result.exit)  # done, and the answer is "no" (e.g. replay found a drift)


def _declare(parser: CommandParser, cmd: KeelCommand) -> None:
    """The options every command has (``--json``; ``--as`` as it takes it), then its own."""
    parser.add_argument("--json", action="store_true", help="print the API's JSON shape")
    if cmd.acts or cmd.as_optional:
        parser.add_argument(
            "--as",
            dest="as_user",
            required=cmd.acts,
            metavar="USER",
            help="act as this user" if cmd.acts else "read as this user (with their authority)",
        )
    cmd.arguments(parser)


def _user(username: str):
    """The user ``--as`` names: it must exist and be active (else exit 2)."""
    User = get_user_model()
    user = User.objects.filter(**{User.USERNAME_FIELD: username}).first()
    if user is None:
        raise NotFound(f"--as: no user {username!r}")
    if not user.is_active:
        raise InvalidInput("--as", f"the user {username!r} is not active")
    return user
