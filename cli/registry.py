"""The commands of ``manage.py keel``: each registers itself here, the parser is built from them.

A command is a function ``run(args, user) -> Result`` with the arguments it declares
(``arguments(parser)``); ``acts=True`` gives it the ``--as USER`` it acts as (required);
``as_optional=True`` an ``--as USER`` it may read as (``run(args, user_or_None)``: without
it the shell reads, as ``keel list`` does; with it, with that user's authority). A name of
two words (``"schedules add"``) is a subcommand of the first (``keel schedules add``): the
first word may be a command of its own (``keel schedules``) or only their group
(``keel workflow pause|resume``). It raises the services' errors (InvalidInput, NotFound,
Conflict, Forbidden) or ``UsageError``; ``manage.py keel`` turns each into its exit status
and one sentence.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from pydantic import BaseModel

from executions.errors import InvalidInput


class UsageError(Exception):
    """Bad usage or malformed input on the command line (exit 2)."""


@dataclass(frozen=True)
class Result:
    """What a command answers: ``data`` as the API's JSON shape (printed with ``--json``),
    ``lines`` for people. ``exit`` other than 0: done, but the answer is "no" (replay's drift).
    ``error``: one sentence for stderr after the answer is printed (a part that failed)."""

    data: Any
    lines: list[str] = field(default_factory=list)
    exit: int = 0
    error: str | None = None


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[..., Result]
    acts: bool = False  # takes --as USER, and acts with that user's authority
    as_optional: bool = False  # takes an optional --as USER: reads with that user's authority when given
    # Acts one item at a time, each committed with its via.cli marks (cli.trace.acting per
    # item, a bulk's): a crash keeps what was done. Otherwise the whole act is one transaction.
    per_item: bool = False


_commands: dict[str, Command] = {}


def command(
    name: str,
    *,
    help: str,
    arguments: Callable[[argparse.ArgumentParser], None] = lambda _p: None,
    acts=False,
    as_optional=False,
    per_item=False,
) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    """Register ``run`` as ``manage.py keel NAME`` (``NAME``: one word, or two for a subcommand)."""

    def register(run: Callable[..., Result]) -> Callable[..., Result]:
        if name in _commands:
            raise ValueError(f"keel command {name!r} registered twice")
        if not 1 <= len(name.split()) <= 2 or name != " ".join(name.split()):
            raise ValueError(f"keel command {name!r}: a word, or two for a subcommand")
        if acts and as_optional:
            raise ValueError(f"keel command {name!r}: --as is either required (acts) or optional, not both")
        _commands[name] = Command(
            name=name, help=help, arguments=arguments, run=run, acts=acts, as_optional=as_optional, per_item=per_item
        )
        return run

    return register


def commands() -> list[Command]:
    return sorted(_commands.values(), key=lambda c: c.name)


def get(name: str) -> Command:
    return _commands[name]


@dataclass(frozen=True)
class Group:
    """A word of ``manage.py keel``: its own command (None: only a group), its subcommands."""

    name: str
    own: Command | None
    subcommands: list[Command]

    @property
    def help(self) -> str:
        if self.own:
            return self.own.help
        words = " | ".join(c.name.split()[1] for c in self.subcommands)
        return f"keel {self.name} {words} (keel {self.name} SUBCOMMAND --help)"


def groups() -> list[Group]:
    """The first words of the registered commands, each with its command and subcommands."""
    words = sorted({name.split()[0] for name in _commands})
    return [
        Group(
            name=word,
            own=_commands.get(word),
            subcommands=[c for c in commands() if c.name.startswith(f"{word} ")],
        )
        for word in words
    ]


def json_argument(text: str | None, *, field_name: str) -> Any:
    """``text`` as JSON, or UsageError naming the option (exit 2)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--{field_name.replace('_', '-')} is not valid JSON ({exc.msg} at character {exc.pos})"
        ) from None


def as_json(data: Any) -> str:
    return json.dumps(data, cls=DjangoJSONEncoder, indent=2, sort_keys=False, ensure_ascii=False)


def api_json(schema: type[BaseModel], data: Any) -> Any:
    """``data`` as the API answers it with the response ``schema``: validated and dumped as
    django-ninja dumps a response (Python mode), so ``as_json`` encodes it with Django's
    encoder as ninja's renderer does (a time to the millisecond, as the API's)."""
    return schema.model_validate(data, from_attributes=True).model_dump()


def positive(text: str) -> int:
    """An argparse type: an integer ≥ 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def refuse(field: str, reason: str) -> InvalidInput:
    return InvalidInput(field, reason)
