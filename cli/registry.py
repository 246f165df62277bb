"""The commands of ``manage.py keel``: each registers itself here, the parser is built from them.

A command is a function ``run(args, user) -> Result`` with the arguments it declares
(``arguments(parser)``); ``acts=True`` gives it the ``--as USER`` it acts as (required).
It raises the services' errors (InvalidInput, NotFound, Conflict, Forbidden) or
``UsageError``; ``manage.py keel`` turns each into its exit status and one sentence.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

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
    per_item=False,
) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    """Register ``run`` as ``manage.py keel NAME``."""

    def register(run: Callable[..., Result]) -> Callable[..., Result]:
        if name in _commands:
            raise ValueError(f"keel command {name!r} registered twice")
        _commands[name] = Command(name=name, help=help, arguments=arguments, run=run, acts=acts, per_item=per_item)
        return run

    return register


def commands() -> list[Command]:
    return sorted(_commands.values(), key=lambda c: c.name)


def get(name: str) -> Command:
    return _commands[name]


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
