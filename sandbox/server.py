"""Sandbox HTTP server: simulated external services with fault injection.

Standard library only (no Django), so it runs as ``python -m sandbox.server``.

Contract summary (see the endpoint handlers for details):

* Every request to a service endpoint (``/reports/publish``,
  ``/reports/publications``, ``/orders``, ``/notify``, ``/notifications``,
  ``/tickets/{id}``, ``/orders/{id}``, ``/stock/{sku}``, and the model
  providers ``/v1/chat/completions`` and ``/v1/messages``) is a **call**:
  counted for the endpoint (its path, e.g. ``/tickets/TCK-1001``) and, when it
  carries an ``Idempotency-Key`` header, for that key. Model calls count
  under their ``X-Model-Call-Key`` header instead. ``POST /orders`` in
  reference mode counts under the header key if present, else under the body
  ``reference``.
* An **effect** is a committed state change (publication, order,
  notification), counted in the same SQLite transaction that creates it. A
  model call is never an effect.
* Calls and effects live in the SQLite ``stats`` table and so survive a
  restart of the sandbox with the same database file.
* Control endpoints (``/_health``, ``/_stats``, ``/_reset``, ``/_faults``,
  ``/_config``) are never counted and never faulted.

Support data (read-only, ``sandbox/support_data.py``):

* ``GET /tickets/{id}`` (``TCK-1001`` … ``TCK-1005``): ``{"ticket_id",
  "status", "opened_on", "customer": {"id", "name", "email"}, "order_id",
  "sku", "item", "quantity", "subject", "message"}``; 404 ``{"error"}`` if
  unknown.
* ``GET /orders/{id}`` (``ORD-1001`` … ``ORD-1005``, the past orders of
  ``workflows/orders.py``): ``{"order_id", "catalogue_id", "placed_on",
  "currency", "customer", "shipping_address", "items": [{"sku", "name", "qty",
  "unit_price"}]}``; 404 if unknown.
* ``GET /stock/{sku}``: ``{"sku", "name", "available"}``; 404 if unknown.

Model providers (``sandbox/providers.py``, policy in ``sandbox/agent_policy.py``):

* ``POST /v1/chat/completions`` (OpenAI Chat Completions) and ``POST
  /v1/messages`` (Anthropic Messages) run the same deterministic support-agent
  policy on the conversation they are sent, in their own wire format (tools,
  tool calls, usage). Any ``Authorization``/``x-api-key`` is accepted, and
  none is needed; no header is stored. Their errors, faults included, use the
  provider's own error JSON.

Faults (``POST /_faults``) apply to every service endpoint; a parameterised
endpoint is named either by one path (``/tickets/TCK-1001``) or by its
pattern (``/tickets/{id}``). On a provider, ``commit_then_hang`` computes and
counts the response, then answers it late; ``rogue_tool_call`` (providers
only) makes the response propose ``submit_replacement`` whatever the
conversation, even when that tool is not offered (an agent's request only: a
route step's request, offering ``choose_next_step``, leaves it queued;
``rogue_route`` is the same for route requests only); ``quote_headers``
(providers) answers 500 with a message quoting every request header, API key
included, as a careless gateway does; ``garbage`` (providers, ``"variant"``:
``nul``, ``surrogate``, ``tokens``, ``long_fields``) answers a parseable
response with that garbage in it. ``echo_secret`` (any endpoint; ``"status"``, default
200; ``"secret"``, default the request's ``Authorization``/``x-api-key`` credential)
echoes that secret in every encoding of ``sandbox/echo.py`` — added to the answer
(a provider's text, a service's JSON as ``"echo"``) or, with an error status, as the
error's message — as a careless service echoes a key it knows.

``/obedient/v1/chat/completions`` and ``/obedient/v1/messages`` speak the same
wire formats, played by a model that obeys every ``call TOOL with {json}`` it
finds in the system or user text or in a tool result, once each, as soon as that
tool is offered, before the ordinary policy (``agent_policy.obey``): a prompt
injection, as the runtime meets it.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from sandbox import agent_policy, echo, support_data
from sandbox.providers import OBEDIENT_PREFIX, PROVIDERS, ProviderError, append_text, garble, request_digest

IDEMPOTENCY_HEADER = "Idempotency-Key"
MODEL_CALL_HEADER = "X-Model-Call-Key"

SCHEMA = """
CREATE TABLE IF NOT EXISTS publications (
    id INTEGER PRIMARY KEY,
    publication_id TEXT NOT NULL UNIQUE,
    key TEXT UNIQUE,
    fingerprint TEXT NOT NULL,
    artifact_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    sha256 TEXT,
    title TEXT,
    content TEXT,
    audience TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
    id INTEGER PRIMARY KEY,
    order_id TEXT NOT NULL UNIQUE,
    key TEXT UNIQUE,
    fingerprint TEXT NOT NULL,
    reference TEXT NOT NULL,
    status TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS orders_reference ON orders (reference);
CREATE TABLE IF NOT EXISTS notifications (
    id INTEGER PRIMARY KEY,
    notification_id TEXT NOT NULL UNIQUE,
    key TEXT UNIQUE,
    fingerprint TEXT NOT NULL,
    channel TEXT NOT NULL,
    recipients TEXT NOT NULL,
    subject TEXT,
    body TEXT,
    created_at TEXT NOT NULL
);
-- key = '' holds the endpoint total; other rows hold per-key counts.
CREATE TABLE IF NOT EXISTS stats (
    endpoint TEXT NOT NULL,
    key TEXT NOT NULL,
    calls INTEGER NOT NULL DEFAULT 0,
    effects INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (endpoint, key)
);
"""

DATA_TABLES = ("publications", "orders", "notifications", "stats")

# Fault name -> (HTTP status, error message) for the faults that answer at once.
IMMEDIATE_FAULTS = {
    "error_500": (500, "injected server error"),
    "rate_limit": (429, "injected rate limit"),
    "error_400": (400, "injected invalid input"),
    "error_422": (422, "injected unprocessable input"),
    "error_403": (403, "injected permission denied"),
}
HANG_FAULTS = ("timeout", "commit_then_hang")
# Model providers only: a tool call whatever the state; an error quoting the request's
# headers (API key included, as a careless gateway does); a parseable answer full of garbage.
PROVIDER_FAULTS = ("rogue_tool_call", "rogue_route", "quote_headers", "garbage")
ROUTE_TOOL = "choose_next_step"  # a route step's one tool (support_agent v2)


def _is_route_request(body: Any) -> bool:
    """A model request offering the route tool (a route step's), in either wire format."""
    tools = body.get("tools") if isinstance(body, dict) else None
    if not isinstance(tools, list):
        return False
    names = {t.get("name") or (t.get("function") or {}).get("name") for t in tools if isinstance(t, dict)}
    return ROUTE_TOOL in names


GARBAGE_VARIANTS = ("nul", "surrogate", "tokens", "long_fields")
# Any endpoint: a secret echoed back in every encoding (sandbox/echo.py).
ECHO_FAULTS = ("echo_secret",)
FAULT_NAMES = tuple(IMMEDIATE_FAULTS) + HANG_FAULTS + PROVIDER_FAULTS + ECHO_FAULTS


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _canonical(value: Any) -> str:
    """Stable JSON used to compare the arguments of two idempotent calls."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class HttpError(Exception):
    """Raised by handlers to answer ``status`` with ``{"error": message}`` (a
    provider endpoint answers its own error shape, naming ``param``)."""

    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]
    orders_idempotent: bool = True  # orders mode when the request arrived
    route: str = ""  # the routing pattern, e.g. /tickets/{id}; path for fixed routes
    params: dict[str, str] = field(default_factory=dict)  # values of the pattern's {names}
    rogue_tool_call: bool = False  # a provider answers with the rogue_tool_call fault
    garbage: str = ""  # a provider answers with the garbage fault's variant

    @property
    def idempotency_key(self) -> str | None:
        return self.headers.get(IDEMPOTENCY_HEADER.lower()) or None

    @property
    def model_call_key(self) -> str | None:
        return self.headers.get(MODEL_CALL_HEADER.lower()) or None


@dataclass
class Reply:
    """A response; ``delay`` seconds are slept before it is written."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


# --------------------------------------------------------------------------
# Persistence
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Resource:
    """A table of created things with sequential public ids (``PUB-0001``)."""

    table: str
    id_column: str
    id_prefix: str
    id_offset: int
    to_dict: Callable[[sqlite3.Row], dict[str, Any]]

    def public_id(self, number: int) -> str:
        return f"{self.id_prefix}-{number + self.id_offset:04d}"


def _publication_dict(row: sqlite3.Row) -> dict[str, Any]:
    names = ("publication_id", "key", "artifact_id", "version", "sha256", "title", "audience", "content", "created_at")
    return {name: row[name] for name in names}


def _order_dict(row: sqlite3.Row) -> dict[str, Any]:
    order = json.loads(row["payload"])
    order.update(
        order_id=row["order_id"],
        reference=row["reference"],
        key=row["key"],
        status=row["status"],
        created_at=row["created_at"],
    )
    return order


def _notification_dict(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "notification_id": row["notification_id"],
        "key": row["key"],
        "channel": row["channel"],
        "to": json.loads(row["recipients"]),
        "subject": row["subject"],
        "body": row["body"],
        "created_at": row["created_at"],
    }


PUBLICATIONS = Resource("publications", "publication_id", "PUB", 0, _publication_dict)
ORDERS = Resource("orders", "order_id", "ORD", 9000, _order_dict)
NOTIFICATIONS = Resource("notifications", "notification_id", "NTF", 0, _notification_dict)


class Store:
    """SQLite persistence. Every operation is one short transaction.

    A process-wide lock serialises transactions (so sequential ids and
    idempotency checks are race-free between threads); WAL mode and a busy
    timeout cover other processes opening the same file.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout=10000")
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Yield a connection inside BEGIN IMMEDIATE; commit on success."""
        with self._lock, self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @staticmethod
    def _bump(conn: sqlite3.Connection, endpoint: str, key: str | None, calls: int = 0, effects: int = 0) -> None:
        for stat_key in ("", key) if key else ("",):
            conn.execute(
                "INSERT INTO stats (endpoint, key, calls, effects) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (endpoint, key) DO UPDATE SET"
                " calls = calls + excluded.calls, effects = effects + excluded.effects",
                (endpoint, stat_key, calls, effects),
            )

    def record_call(self, endpoint: str, key: str | None) -> None:
        """Count one call for ``endpoint`` (and for ``key`` when given)."""
        with self.transaction() as conn:
            self._bump(conn, endpoint, key, calls=1)

    def stats(self) -> dict[str, Any]:
        """``{"endpoints": {path: counts}, "keys": {key: counts}}``; key counts
        are summed over endpoints."""
        with self.transaction() as conn:
            endpoints = conn.execute(
                "SELECT endpoint, calls, effects FROM stats WHERE key = '' ORDER BY endpoint"
            ).fetchall()
            keys = conn.execute(
                "SELECT key, SUM(calls) AS calls, SUM(effects) AS effects FROM stats"
                " WHERE key != '' GROUP BY key ORDER BY key"
            ).fetchall()
        return {
            "endpoints": {r["endpoint"]: {"calls": r["calls"], "effects": r["effects"]} for r in endpoints},
            "keys": {r["key"]: {"calls": r["calls"], "effects": r["effects"]} for r in keys},
        }

    def create(
        self,
        resource: Resource,
        *,
        key: str | None,
        fingerprint: str,
        values: dict[str, Any],
        endpoint: str,
        stat_key: str | None,
    ) -> tuple[dict[str, Any], bool]:
        """Create a row, or replay the existing row stored under ``key``.

        Returns ``(item, replayed)``. A replay commits nothing; a creation
        counts one effect for ``endpoint``/``stat_key`` in the same transaction.
        Raises HttpError(409) when ``key`` exists with another fingerprint.
        ``key=None`` always creates.
        """
        with self.transaction() as conn:
            if key is not None:
                existing = conn.execute(f"SELECT * FROM {resource.table} WHERE key = ?", (key,)).fetchone()
                if existing is not None:
                    if existing["fingerprint"] != fingerprint:
                        raise HttpError(409, "idempotency key reused with different arguments")
                    return resource.to_dict(existing), True
            number = conn.execute(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {resource.table}").fetchone()[0]
            row = {
                "id": number,
                resource.id_column: resource.public_id(number),
                "key": key,
                "fingerprint": fingerprint,
                "created_at": _now(),
                **values,
            }
            columns = ", ".join(row)
            marks = ", ".join("?" for _ in row)
            conn.execute(f"INSERT INTO {resource.table} ({columns}) VALUES ({marks})", tuple(row.values()))
            self._bump(conn, endpoint, stat_key, effects=1)
            created = conn.execute(f"SELECT * FROM {resource.table} WHERE id = ?", (number,)).fetchone()
            return resource.to_dict(created), False

    def find(self, resource: Resource, **filters: str) -> list[dict[str, Any]]:
        """Rows matching all given column filters (all rows if none), oldest first."""
        where = " AND ".join(f"{column} = ?" for column in filters) or "1"
        with self.transaction() as conn:
            rows = conn.execute(
                f"SELECT * FROM {resource.table} WHERE {where} ORDER BY id", tuple(filters.values())
            ).fetchall()
        return [resource.to_dict(row) for row in rows]

    def reset(self) -> None:
        """Delete every publication, order, notification and stat."""
        with self.transaction() as conn:
            for table in DATA_TABLES:
                conn.execute(f"DELETE FROM {table}")


# --------------------------------------------------------------------------
# Fault injection
# --------------------------------------------------------------------------


class FaultQueue:
    """In-memory, thread-safe FIFO of injected faults.

    Each entry applies to the next ``remaining`` calls of ``method endpoint``;
    entries for the same endpoint are consumed in the order they were added.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []

    def add(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self._entries.append(entry)

    def take(self, method: str, *endpoints: str, passes: Any = None) -> dict[str, Any] | None:
        """Consume one use of the first fault added for this method and any of
        ``endpoints`` (a path and its routing pattern), if any; ``passes(fault)`` true:
        this request leaves that fault queued for a later one."""
        with self._lock:
            for entry in self._entries:
                if passes is not None and passes(entry["fault"]):
                    continue
                if entry["endpoint"] in endpoints and entry["method"] == method:
                    entry["remaining"] -= 1
                    if entry["remaining"] <= 0:
                        self._entries.remove(entry)
                    return dict(entry)
        return None

    def list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(entry) for entry in self._entries]

    def clear(self) -> int:
        with self._lock:
            cleared = len(self._entries)
            self._entries.clear()
            return cleared


def _number(body: dict[str, Any], name: str, default: float) -> float:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise HttpError(400, f"{name} must be a non-negative number")
    return value


# --------------------------------------------------------------------------
# Application
# --------------------------------------------------------------------------


def _require_str(body: dict[str, Any], name: str, *, optional: bool = False) -> str | None:
    value = body.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str) or (not optional and not value):
        raise HttpError(400, f"{name} must be a {'string' if optional else 'non-empty string'}")
    return value


class Sandbox:
    """Routes requests, counts calls, applies faults and runs the services.

    ``orders_idempotent`` is the startup orders mode; it can be changed via
    ``POST /_config`` and is restored by ``POST /_reset``.
    """

    def __init__(self, db_path: str | Path, orders_idempotent: bool = True):
        self.store = Store(db_path)
        self.faults = FaultQueue()
        self.default_orders_idempotent = orders_idempotent
        self.orders_idempotent = orders_idempotent
        # (method, path) -> handler; counted routes are the service endpoints.
        self.routes: dict[tuple[str, str], Callable[[Request], Reply]] = {
            ("POST", "/reports/publish"): self.publish,
            ("GET", "/reports/publications"): self.list_publications,
            ("POST", "/orders"): self.submit_order,
            ("GET", "/orders"): self.list_orders,
            ("POST", "/notify"): self.notify,
            ("GET", "/notifications"): self.list_notifications,
            ("GET", "/tickets/{id}"): self.get_ticket,
            ("GET", "/orders/{id}"): self.get_order,
            ("GET", "/stock/{sku}"): self.get_stock,
            ("POST", "/v1/chat/completions"): self.model_call,
            ("POST", "/v1/messages"): self.model_call,
            ("POST", "/obedient/v1/chat/completions"): self.model_call,
            ("POST", "/obedient/v1/messages"): self.model_call,
            ("GET", "/_health"): lambda request: Reply(200, {"ok": True}),
            ("GET", "/_stats"): lambda request: Reply(200, self.store.stats()),
            ("POST", "/_reset"): self.reset,
            ("GET", "/_faults"): self.list_faults,
            ("POST", "/_faults"): self.add_fault,
            ("DELETE", "/_faults"): self.clear_faults,
            ("GET", "/_config"): lambda request: Reply(200, self.config()),
            ("POST", "/_config"): self.set_config,
        }

    # -- dispatch -----------------------------------------------------------

    @staticmethod
    def is_counted(path: str) -> bool:
        return not path.startswith("/_")

    def service_endpoints(self) -> set[str]:
        """Counted routes: fixed paths and patterns such as ``/tickets/{id}``."""
        return {path for _, path in self.routes if self.is_counted(path)}

    def resolve(self, path: str) -> tuple[str, dict[str, str]] | None:
        """``(route, params)`` for ``path``: a fixed route is itself; a pattern
        matches when its fixed segments do and each ``{name}`` matches one
        non-empty segment. None if nothing matches."""
        routes = sorted({route for _, route in self.routes})
        if path in routes:
            return path, {}
        segments = path.split("/")
        for route in routes:
            parts = route.split("/")
            if "{" not in route or len(parts) != len(segments):
                continue
            params = {}
            for part, segment in zip(parts, segments, strict=True):
                if part.startswith("{") and segment:
                    params[part[1:-1]] = unquote(segment)
                elif part != segment:
                    break
            else:
                return route, params
        return None

    @staticmethod
    def error(route: str, status: int, message: str, *, param: str | None = None, fault: str | None = None) -> Reply:
        """An error in the route's shape: a provider's own error JSON, else
        ``{"error": message}`` (with ``"fault"`` when injected)."""
        provider = PROVIDERS.get(route)
        if provider is not None:
            return Reply(status, provider.error_body(status, message, param=param))
        return Reply(status, {"error": message, "fault": fault} if fault else {"error": message})

    def dispatch(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], raw_body: bytes
    ) -> Reply:
        """Answer one request. Never raises for bad input."""
        resolved = self.resolve(path)
        if resolved is None:
            return Reply(404, {"error": f"unknown path {path}"})
        route, params = resolved
        methods = sorted(m for m, p in self.routes if p == route)
        if method not in methods:
            reply = self.error(route, 405, f"method {method} not allowed on {path}")
            reply.headers["Allow"] = ", ".join(methods)
            return reply
        request = Request(method, path, query, headers, {}, self.orders_idempotent, route, params)
        try:
            request.body = self._parse_body(raw_body)
        except HttpError as exc:
            if self.is_counted(route):
                self.store.record_call(path, self._stat_key(request))
            return self.error(route, exc.status, exc.message)
        try:
            if not self.is_counted(route):
                return self.routes[method, route](request)
            return self._service_call(request)
        except HttpError as exc:
            return self.error(route, exc.status, exc.message, param=exc.param)

    @staticmethod
    def _parse_body(raw: bytes) -> dict[str, Any]:
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise HttpError(400, f"malformed JSON body: {exc}") from None
        if not isinstance(body, dict):
            raise HttpError(400, "JSON body must be an object")
        return body

    def _service_call(self, request: Request) -> Reply:
        """Count the call, then apply a queued fault or run the handler."""
        self.store.record_call(request.path, self._stat_key(request))
        handler = self.routes[request.method, request.route]
        # rogue_tool_call is for an agent's tool-calling request, rogue_route for a route's:
        # each waits in the queue for a request of its kind.
        route = _is_route_request(request.body)
        fault = self.faults.take(
            request.method,
            request.path,
            request.route,
            passes=lambda name: (name == "rogue_tool_call" and route) or (name == "rogue_route" and not route),
        )
        if fault is None:
            return handler(request)
        name = fault["fault"]
        if name in IMMEDIATE_FAULTS:
            status, message = IMMEDIATE_FAULTS[name]
            reply = self.error(request.route, status, message, fault=name)
            if name == "rate_limit":
                retry_after = fault["retry_after"]
                if request.route not in PROVIDERS:
                    reply.body["retry_after"] = retry_after
                reply.headers["Retry-After"] = f"{retry_after:g}"
            return reply
        if name == "timeout":
            reply = self.error(request.route, 504, "injected timeout", fault=name)
            reply.delay = fault["hang_seconds"]
            return reply
        if name in ("rogue_tool_call", "rogue_route"):
            request.rogue_tool_call = True
            return handler(request)
        if name == "quote_headers":
            quoted = "; ".join(f"{k}: {v}" for k, v in sorted(request.headers.items()))
            return self.error(request.route, 500, f"upstream gateway error for the request with headers {quoted}")
        if name == "garbage":
            request.garbage = fault["variant"]
            return handler(request)
        if name == "echo_secret":
            return self._echo(request, handler, fault)
        try:  # commit_then_hang: real work (counted above), then a late answer
            reply = handler(request)
        except HttpError as exc:
            reply = self.error(request.route, exc.status, exc.message, param=exc.param)
        reply.delay = fault["hang_seconds"]
        return reply

    def _echo(self, request: Request, handler: Callable[[Request], Reply], fault: dict[str, Any]) -> Reply:
        """The ``echo_secret`` fault: the answer (or, with an error status, the error) carries
        the fault's secret, or the request's credential, in every encoding."""
        secret = fault["secret"] or echo.credential(request.headers)
        if not secret:
            raise HttpError(400, "echo_secret: the request carried no credential and the fault names no secret")
        said = echo.echo(secret)
        if fault["status"] >= 400:
            return self.error(request.route, fault["status"], f"upstream error ({said})", fault="echo_secret")
        reply = handler(request)
        provider = PROVIDERS.get(request.route)
        if provider is not None and reply.status < 300:
            reply.body = append_text(provider, reply.body, said)
        else:
            reply.body["echo"] = said
        return reply

    @staticmethod
    def _stat_key(request: Request) -> str | None:
        """Key a call is counted under: X-Model-Call-Key for a model call;
        otherwise Idempotency-Key, or for reference-mode orders without it,
        the body ``reference``."""
        if request.route in PROVIDERS:
            return request.model_call_key
        key = request.idempotency_key
        if key or request.orders_idempotent or (request.method, request.path) != ("POST", "/orders"):
            return key
        reference = request.body.get("reference")
        return reference if isinstance(reference, str) and reference else None

    # -- services -----------------------------------------------------------

    def publish(self, request: Request) -> Reply:
        """POST /reports/publish: idempotent on the required Idempotency-Key.

        201 on creation, 200 ``replayed: true`` for the same key and the same
        (artifact_id, version, sha256), 409 for the same key with others.
        """
        key = request.idempotency_key
        if key is None:
            raise HttpError(400, f"{IDEMPOTENCY_HEADER} header is required")
        body = request.body
        artifact_id = _require_str(body, "artifact_id")
        version = body.get("version")
        if isinstance(version, bool) or not isinstance(version, int):
            raise HttpError(400, "version must be an integer")
        values = {
            "artifact_id": artifact_id,
            "version": version,
            "sha256": _require_str(body, "sha256", optional=True),
            "title": _require_str(body, "title", optional=True),
            "content": _require_str(body, "content", optional=True),
            "audience": _require_str(body, "audience", optional=True),
        }
        fingerprint = _canonical([artifact_id, version, values["sha256"]])
        publication, replayed = self.store.create(
            PUBLICATIONS, key=key, fingerprint=fingerprint, values=values, endpoint=request.path, stat_key=key
        )
        return Reply(
            200 if replayed else 201,
            {"publication_id": publication["publication_id"], "key": key, "status": "published", "replayed": replayed},
        )

    def list_publications(self, request: Request) -> Reply:
        """GET /reports/publications[?key=K][&artifact_id=A]."""
        filters = self._filters(request, "key", "artifact_id")
        return Reply(200, {"publications": self.store.find(PUBLICATIONS, **filters)})

    def submit_order(self, request: Request) -> Reply:
        """POST /orders (body needs a string ``reference``).

        Idempotent mode: like publish, but the Idempotency-Key is optional
        (without one every call creates). Reference mode: the header is
        ignored and every call creates a new order with ``key: null``.
        """
        body = request.body
        reference = _require_str(body, "reference")
        key = request.idempotency_key if request.orders_idempotent else None
        stat_key = self._stat_key(request)
        payload = {
            name: value for name, value in body.items() if name not in ("order_id", "key", "status", "created_at")
        }
        order, replayed = self.store.create(
            ORDERS,
            key=key,
            fingerprint=_canonical(body),
            endpoint=request.path,
            stat_key=stat_key,
            values={"reference": reference, "status": "submitted", "payload": json.dumps(payload)},
        )
        return Reply(200 if replayed else 201, {**order, "replayed": replayed})

    def list_orders(self, request: Request) -> Reply:
        """GET /orders[?key=K][&reference=R]."""
        filters = self._filters(request, "key", "reference")
        return Reply(200, {"orders": self.store.find(ORDERS, **filters)})

    def notify(self, request: Request) -> Reply:
        """POST /notify: idempotent on Idempotency-Key like publish (the key is
        optional; without one every call sends). Fingerprint: channel, to,
        subject, body."""
        body = request.body
        channel = _require_str(body, "channel")
        recipients = body.get("to")
        if not isinstance(recipients, list) or not all(isinstance(r, str) for r in recipients):
            raise HttpError(400, "to must be a list of strings")
        subject = _require_str(body, "subject", optional=True)
        text = _require_str(body, "body", optional=True)
        key = request.idempotency_key
        notification, replayed = self.store.create(
            NOTIFICATIONS,
            key=key,
            endpoint=request.path,
            stat_key=key,
            fingerprint=_canonical([channel, recipients, subject, text]),
            values={"channel": channel, "recipients": json.dumps(recipients), "subject": subject, "body": text},
        )
        return Reply(
            200 if replayed else 201,
            {"notification_id": notification["notification_id"], "key": key, "status": "sent", "replayed": replayed},
        )

    def list_notifications(self, request: Request) -> Reply:
        """GET /notifications[?key=K]."""
        filters = self._filters(request, "key")
        return Reply(200, {"notifications": self.store.find(NOTIFICATIONS, **filters)})

    def get_ticket(self, request: Request) -> Reply:
        """GET /tickets/{id}: a support ticket; 404 if unknown."""
        ticket_id = request.params["id"]
        known = ", ".join(support_data.ticket_ids())
        return self._found(support_data.get_ticket(ticket_id), f"unknown ticket {ticket_id!r} (known: {known})")

    def get_order(self, request: Request) -> Reply:
        """GET /orders/{id}: a past order of the catalogue; 404 if unknown."""
        order_id = request.params["id"]
        known = ", ".join(support_data.order_ids())
        return self._found(support_data.get_order(order_id), f"unknown past order {order_id!r} (known: {known})")

    def get_stock(self, request: Request) -> Reply:
        """GET /stock/{sku}: units available; 404 for a SKU outside the catalogue."""
        sku = request.params["sku"]
        return self._found(support_data.get_stock(sku), f"unknown sku {sku!r}")

    @staticmethod
    def _found(item: dict[str, Any] | None, missing: str) -> Reply:
        if item is None:
            raise HttpError(404, missing)
        return Reply(200, item)

    def model_call(self, request: Request) -> Reply:
        """POST /v1/chat/completions, POST /v1/messages: the support-agent
        policy's next move for the conversation sent, in the provider's wire
        format; 400 in its error shape for a request it would refuse."""
        provider = PROVIDERS[request.route]
        try:
            conversation = provider.read(request.body)
        except ProviderError as exc:
            raise HttpError(exc.status, exc.message, exc.param) from None
        if request.route.startswith(OBEDIENT_PREFIX) and not request.rogue_tool_call:
            decision = agent_policy.obey(conversation)
        else:
            decision = agent_policy.decide(conversation, rogue=request.rogue_tool_call)
        digest = request_digest({"rogue": request.rogue_tool_call, "request": request.body})
        body = provider.render(decision, body=request.body, digest=digest)
        if request.garbage:
            body = garble(provider, body, request.garbage)
        return Reply(200, body, headers={provider.request_id_header: f"req_{digest[:24]}"})

    @staticmethod
    def _filters(request: Request, *names: str) -> dict[str, str]:
        return {name: request.query[name] for name in names if name in request.query}

    # -- control ------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        idempotent = self.orders_idempotent
        return {"orders_idempotent": idempotent, "orders_mode": "idempotent" if idempotent else "reference"}

    def set_config(self, request: Request) -> Reply:
        """POST /_config {"orders_idempotent": bool} (or {"orders_mode":
        "idempotent"|"reference"}); answers the resulting config."""
        body = request.body
        if "orders_idempotent" in body:
            value = body["orders_idempotent"]
            if not isinstance(value, bool):
                raise HttpError(400, "orders_idempotent must be true or false")
        elif "orders_mode" in body:
            if body["orders_mode"] not in ("idempotent", "reference"):
                raise HttpError(400, "orders_mode must be 'idempotent' or 'reference'")
            value = body["orders_mode"] == "idempotent"
        else:
            raise HttpError(400, "expected orders_idempotent (bool) or orders_mode")
        self.orders_idempotent = value
        return Reply(200, self.config())

    def reset(self, request: Request) -> Reply:
        """POST /_reset: empty all tables, clear faults, restore startup config."""
        self.store.reset()
        self.faults.clear()
        self.orders_idempotent = self.default_orders_idempotent
        return Reply(200, {"reset": True, "config": self.config()})

    def list_faults(self, request: Request) -> Reply:
        return Reply(200, {"faults": self.faults.list()})

    def clear_faults(self, request: Request) -> Reply:
        return Reply(200, {"cleared": self.faults.clear(), "faults": []})

    def add_fault(self, request: Request) -> Reply:
        """POST /_faults {"endpoint", "fault", "count"=1, "retry_after"=1,
        "hang_seconds"=30, "variant" (garbage), "status"=200 and "secret" (echo_secret),
        "method"=POST if the endpoint accepts POST else GET}.
        ``endpoint`` is a service route (``/orders``, ``/tickets/{id}``) or a
        path one of its patterns matches (``/tickets/TCK-1001``).
        Answers 201 with the added fault and the whole queue; 400 if invalid.
        Documented for test writers in docs/testing.md, "The sandbox's fault API"."""
        body = request.body
        endpoint = body.get("endpoint")
        resolved = self.resolve(endpoint) if isinstance(endpoint, str) else None
        if resolved is None or not self.is_counted(resolved[0]):
            raise HttpError(
                400, f"endpoint must be one of {sorted(self.service_endpoints())} or a path matching a {{pattern}}"
            )
        route = resolved[0]
        accepted = {m for m, p in self.routes if p == route}
        method = body.get("method", "POST" if "POST" in accepted else "GET")
        if method not in accepted:
            raise HttpError(400, f"method must be one of {sorted(accepted)} for {endpoint}")
        fault = body.get("fault")
        if fault not in FAULT_NAMES:
            raise HttpError(400, f"fault must be one of {list(FAULT_NAMES)}")
        if fault in PROVIDER_FAULTS and route not in PROVIDERS:
            raise HttpError(400, f"{fault} applies only to the model providers {sorted(PROVIDERS)}")
        count = body.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise HttpError(400, "count must be a positive integer")
        entry = {
            "endpoint": endpoint,
            "method": method,
            "fault": fault,
            "count": count,
            "remaining": count,
            "retry_after": _number(body, "retry_after", 1),
            "hang_seconds": _number(body, "hang_seconds", 30),
            "variant": body.get("variant", GARBAGE_VARIANTS[0]),
            "status": body.get("status", 200),
            "secret": body.get("secret"),
        }
        if entry["variant"] not in GARBAGE_VARIANTS:
            raise HttpError(400, f"variant must be one of {list(GARBAGE_VARIANTS)}")
        status = entry["status"]
        if isinstance(status, bool) or not isinstance(status, int) or not (status == 200 or 400 <= status <= 599):
            raise HttpError(400, "status must be 200 or an error status (400-599)")
        if entry["secret"] is not None and not (isinstance(entry["secret"], str) and entry["secret"]):
            raise HttpError(400, "secret must be a non-empty string")
        self.faults.add(entry)
        return Reply(201, {"fault": dict(entry), "faults": self.faults.list()})


# --------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------


class SandboxHandler(BaseHTTPRequestHandler):
    """Thin adapter between http.server and :class:`Sandbox`."""

    server: SandboxServer
    protocol_version = "HTTP/1.1"
    server_version = "keel-sandbox/1"

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _handle(self) -> None:
        try:
            reply = self._dispatch()
        except Exception:  # a bug, not bad input: report it, keep serving
            traceback.print_exc(file=sys.stderr)
            reply = Reply(500, {"error": "sandbox internal error"})
        if reply.delay:
            time.sleep(reply.delay)
        self._write(reply)

    def _dispatch(self) -> Reply:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            return Reply(400, {"error": "invalid Content-Length"})
        raw_body = self.rfile.read(length) if length > 0 else b""
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        query = {name: values[0] for name, values in parse_qs(url.query).items()}
        headers = {name.lower(): value for name, value in self.headers.items()}
        return self.server.sandbox.dispatch(self.command, path, query, headers, raw_body)

    def _write(self, reply: Reply) -> None:
        payload = json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. timed out)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request access logging."""

    def log_error(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"sandbox: {format % args}\n")


class SandboxServer(ThreadingHTTPServer):
    """Threaded HTTP server carrying a :class:`Sandbox` as ``.sandbox``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], sandbox: Sandbox):
        self.sandbox = sandbox
        super().__init__(address, SandboxHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def make_server(
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    db_path: str | Path = "var/sandbox.sqlite3",
    orders_idempotent: bool = True,
) -> SandboxServer:
    """Build (bind, not start) a sandbox server; ``port=0`` picks a free port,
    readable from ``server.server_address``. Creates the db's parent dir."""
    return SandboxServer((host, port), Sandbox(db_path, orders_idempotent))


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    db_path: str | Path = "var/sandbox.sqlite3",
    orders_idempotent: bool = True,
) -> None:
    """Run the sandbox until interrupted, after printing
    ``sandbox listening on http://HOST:PORT (db PATH)``."""
    server = make_server(host=host, port=port, db_path=db_path, orders_idempotent=orders_idempotent)
    bound_host, bound_port = server.server_address[:2]
    print(f"sandbox listening on http://{bound_host}:{bound_port} (db {db_path})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options shared by ``python -m sandbox.server`` and ``runsandbox``."""
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--db", default="var/sandbox.sqlite3", help="SQLite file path")
    parser.add_argument(
        "--orders-mode",
        choices=("idempotent", "reference"),
        default="idempotent",
        help="idempotent: honor Idempotency-Key; reference: ignore it",
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sandbox.server", description="Run the keel sandbox services.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    serve(host=args.host, port=args.port, db_path=args.db, orders_idempotent=args.orders_mode == "idempotent")


if __name__ == "__main__":
    main()
