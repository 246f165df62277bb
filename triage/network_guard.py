"""No outbound network during a replay (``keel replay``; triage.replay): a step's code
that reaches for the network — through urllib, http.client, requests, httpx, asyncio or
a raw socket — is refused at the socket, and each refusal is reported with the step
that tried it.

``guarded(replay_one)`` runs each execution's replay inside ``refusing()``, which, for
its duration and process-wide (``keel replay`` is a process of its own; a thread a step
starts is refused too), replaces ``socket.socket.connect``, ``connect_ex`` and
``sendto``, ``socket.create_connection``, ``socket.getaddrinfo`` and the
``gethostby*`` lookups with versions that refuse every destination but the configured
databases' hosts and ports (``settings.DATABASES``: the replay reads the record; its
connection is already open, and a reconnection may resolve and reach it again) and the
process's own collector of traces and Sentry (their sender threads go on meanwhile). A
refusal raises ``NetworkRefused`` (an ``OSError``, so every library reports it as a
failed connection; ``connect_ex`` answers ``EPERM``) and is recorded, whatever the step
does with the error: the replay's item then carries ``"refused": [{"step", "detail"}]``
(absent when nothing was refused). A replay never calls a provider and writes nothing;
this makes the first true for code that doesn't go through ``executions.authoring.http``.

What it can't see: a C extension that opens its own sockets (libpq, libcurl) without
Python's ``socket`` module.
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from executions import runtime
from executions.authoring import registry


class NetworkRefused(OSError):
    """A step tried to reach the network during a replay."""


@dataclass(frozen=True)
class Refusal:
    step: str
    destination: str
    via: str

    def as_dict(self) -> dict[str, str]:
        step = self.step or "a step"
        detail = (
            f"{step} tried to reach {self.destination} (via {self.via}): refused, a replay calls nothing; "
            "the step's recorded output stands"
        )
        return {"step": self.step, "detail": detail}


@dataclass(frozen=True)
class _Allowed:
    hosts: frozenset[str]  # names and addresses of the databases' hosts
    addresses: frozenset[tuple[str, int]]  # (ip, port) a connection may go to
    folders: tuple[str, ...]  # the databases' Unix socket folders


_ORIGINALS = {
    "connect": socket.socket.connect,
    "connect_ex": socket.socket.connect_ex,
    "sendto": socket.socket.sendto,
    "create_connection": socket.create_connection,
    "getaddrinfo": socket.getaddrinfo,
    "gethostbyname": socket.gethostbyname,
    "gethostbyname_ex": socket.gethostbyname_ex,
    "gethostbyaddr": socket.gethostbyaddr,
}
_active: list[tuple[_Allowed, dict[CodeType, str], list[Refusal]]] = []  # innermost last


def guarded(replay_one: Callable[..., dict]) -> Callable[..., dict]:
    """``replay_one`` run with no outbound network and untraced (no part of the execution's
    trace), its refusals added to its item."""

    @functools.wraps(replay_one)
    def run(execution: Any, **kwargs: Any) -> dict:
        with refusing() as refused, runtime.untraced():
            item = replay_one(execution, **kwargs)
        if refused:
            item = {**item, "refused": [r.as_dict() for r in refused]}
        return item

    return run


@contextmanager
def refusing() -> Iterator[list[Refusal]]:
    """Within this block no connection leaves the process but to the databases; yields
    the refusals, in order."""
    refused: list[Refusal] = []
    _active.append((_allowed(), _step_codes(), refused))
    if len(_active) == 1:
        _install()
    try:
        yield refused
    finally:
        _active.pop()
        if not _active:
            _uninstall()


def _step_codes() -> dict[CodeType, str]:
    """The code of every registered workflow's step functions, by step name."""
    codes: dict[CodeType, str] = {}
    for name in registry.names():
        for version in registry.versions(name):
            for step in registry.get(name, version).steps:
                code = getattr(getattr(step, "fn", None), "__code__", None)
                if code is not None:
                    codes.setdefault(code, step.name)
    return codes


@functools.cache
def _allowed() -> _Allowed:
    hosts, addresses, folders = set(), set(), []
    places = [(d.get("HOST") or "", int(d.get("PORT") or 5432)) for d in settings.DATABASES.values()]
    # The process's own senders of traces and errors (their threads run on beside a replay).
    for url in (settings.OTEL_ENDPOINT, settings.SENTRY_DSN):
        if url:
            parts = urlsplit(url)
            places.append((parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)))
    for host, port in places:
        if not host or host.startswith("/"):
            folders.append(host or "/var/run/postgresql")
            continue
        hosts.add(host)
        try:
            found = _ORIGINALS["getaddrinfo"](host, port, type=socket.SOCK_STREAM)
        except OSError:
            found = []
        for *_, address in found:
            hosts.add(address[0])
            addresses.add((address[0], port))
    return _Allowed(frozenset(hosts), frozenset(addresses), tuple(folders))


def _install() -> None:
    socket.socket.connect = _connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]
    socket.socket.sendto = _sendto  # type: ignore[method-assign]
    socket.create_connection = _create_connection
    socket.getaddrinfo = _getaddrinfo
    socket.gethostbyname = _lookup("gethostbyname")
    socket.gethostbyname_ex = _lookup("gethostbyname_ex")
    socket.gethostbyaddr = _lookup("gethostbyaddr")


def _uninstall() -> None:
    for name in ("connect", "connect_ex", "sendto"):
        setattr(socket.socket, name, _ORIGINALS[name])
    for name in ("create_connection", "getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr"):
        setattr(socket, name, _ORIGINALS[name])


# --- the replacements


def _connect(self: socket.socket, address: Any) -> None:
    _check(address, self.family)
    return _ORIGINALS["connect"](self, address)


def _connect_ex(self: socket.socket, address: Any) -> int:
    try:
        _check(address, self.family)
    except NetworkRefused:
        return errno.EPERM
    return _ORIGINALS["connect_ex"](self, address)


def _sendto(self: socket.socket, data: Any, *args: Any) -> int:
    _check(args[-1], self.family)
    return _ORIGINALS["sendto"](self, data, *args)


def _create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
    _check(address, socket.AF_INET)
    return _ORIGINALS["create_connection"](address, *args, **kwargs)


def _getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list:
    if not _host_allowed(host):
        _refuse(f"{_text(host)} (a name lookup)")
    return _ORIGINALS["getaddrinfo"](host, port, *args, **kwargs)


def _lookup(name: str) -> Callable[[str], Any]:
    def lookup(host: str) -> Any:
        if not _host_allowed(host):
            _refuse(f"{_text(host)} (a name lookup)")
        return _ORIGINALS[name](host)

    return lookup


# --- the rule


def _check(address: Any, family: int) -> None:
    allowed = _active[-1][0]
    if family == getattr(socket, "AF_UNIX", None) or isinstance(address, (str, bytes)):
        path = _text(address)
        if not any(path.startswith(folder) for folder in allowed.folders):
            _refuse(f"the Unix socket {path}")
        return
    host, port = _text(address[0]), int(address[1])
    if (host, port) in allowed.addresses:
        return
    named = host in allowed.hosts and not _is_address(host)  # a database's name: where does it lead?
    if named and any((ip, port) in allowed.addresses for ip in _resolved(host)):
        return
    _refuse(f"{host}:{port}")


def _host_allowed(host: Any) -> bool:
    return host is None or _text(host) in _active[-1][0].hosts


def _resolved(host: str) -> set[str]:
    try:
        return {address[0] for *_, address in _ORIGINALS["getaddrinfo"](host, None)}
    except OSError:
        return set()


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _refuse(destination: str) -> None:
    """Record the refusal (with the step whose code is on the stack, and the library that
    asked) and raise it."""
    _, steps, refused = _active[-1]
    frame: FrameType | None = sys._getframe(1)
    via, step = "", ""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not via and module not in ("socket", __name__):
            via = module
        if frame.f_code in steps:
            step = steps[frame.f_code]
            break
        frame = frame.f_back
    refusal = Refusal(step=step, destination=destination, via=via or "?")
    refused.append(refusal)
    raise NetworkRefused(errno.EPERM, refusal.as_dict()["detail"])
