"""Issue 38 (items 9.1 and 9.2): the documented web command (docs/operations.md's process
table, run through the harness) in the documented production setup — ``KEEL_ENV=production``
behind a TLS proxy, the application's database role — under load and against clients that
stall.

Load: 2,100 requests from 32 clients at once — anonymous, a made-up token, a real token's
reads and real starts. Under ASGI Django runs each request in a thread of its own; with the
connections kept 600 s (the old default) each thread left one behind, and 300 such requests
held 97 of PostgreSQL's 100 connections, then half the requests after them were 503s. Now
the web holds at most ``--workers`` × ``KEEL_WEB_CONCURRENCY`` (4 × 4 = 16) connections at
any moment (counted in ``pg_stat_activity`` as the application's role, 50 times a second)
and none once the load is over; no answer is a 5xx. The load stops at once if the bound is
passed, so a regression fails the test without starving the machine's PostgreSQL.

Stalls, on a raw socket: a body declared and not sent is a 408 with a JSON body once
``KEEL_WEB_BODY_SECONDS`` pass (not gunicorn's plain-text 500 after 30 s), a connection
that sends nothing, or half a request head, is closed after ``KEEL_WEB_IDLE_SECONDS``, and
one idle after an answer after gunicorn's ``--keep-alive`` (2 s)."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections import Counter

import psycopg
import pytest
import requests
from django.conf import settings
from django.db import connection

from executions import services
from executions.models import Execution
from tests.support.procs import free_port, http, wait_for
from tests.support.stack import APP_DB_ROLE
from tests.support.web_command import documented_web_command, on_port

CLIENTS = 32
MIX = {"anonymous": 750, "fake_token": 900, "read": 300, "start": 150}  # 2,100 requests
CONCURRENCY = 4  # KEEL_WEB_CONCURRENCY's default: requests of one web process inside Django at once
PROXY = {"X-Forwarded-Proto": "https"}  # what the documented TLS proxy sets


def production(**env: str) -> dict[str, str]:
    """docs/operations.md, "The production environment" (the database URL and the broker are the stack's)."""
    return {
        "KEEL_ENV": "production",
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_TRUST_X_FORWARDED_PROTO": "true",
        "KEEL_TRUSTED_PROXY_COUNT": "1",
        **env,
    }


def answers(url: str) -> bool:
    """Whether the server answers ``url`` as the proxy would ask (in production, plain http is
    redirected to https, which nothing here serves)."""
    try:
        return http().get(url, headers=PROXY, timeout=1, allow_redirects=False).status_code == 200
    except requests.RequestException:
        return False


def start_web(stack, **env: str) -> tuple[str, list[str]]:
    port = free_port()
    command = documented_web_command()
    web = stack.start("web", on_port(command, port), **production(**env))
    web.wait_until(lambda: answers(f"http://127.0.0.1:{port}/login/"), what="the web server to listen")
    return f"http://127.0.0.1:{port}", command


class ConnectionCount:
    """The test database's connections held by the application's role (the web server's),
    sampled every 20 ms in a thread of its own; ``over`` is set once one passes ``bound``."""

    def __init__(self, bound: int) -> None:
        self.bound, self.most, self.samples = bound, 0, 0
        self.over, self.done = threading.Event(), threading.Event()
        s = connection.settings_dict
        self.url = f"postgres://{s['USER']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def now(self, conn=None) -> int:
        query = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND usename = %s"
        if conn is not None:
            return conn.execute(query, [APP_DB_ROLE]).fetchone()[0]
        with psycopg.connect(self.url, autocommit=True) as own:
            return own.execute(query, [APP_DB_ROLE]).fetchone()[0]

    def held(self) -> list[tuple]:
        """What the application role's connections are doing (state, since, query): a failure's evidence."""
        query = (
            "SELECT state, now() - state_change, backend_start, left(query, 120) FROM pg_stat_activity "
            "WHERE datname = current_database() AND usename = %s"
        )
        with psycopg.connect(self.url, autocommit=True) as own:
            return own.execute(query, [APP_DB_ROLE]).fetchall()

    def _sample(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.done.is_set():
                held = self.now(conn)
                self.most, self.samples = max(self.most, held), self.samples + 1
                if held > self.bound:
                    self.over.set()
                time.sleep(0.02)

    def __enter__(self) -> ConnectionCount:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join(timeout=5)


@pytest.mark.own_stack  # the documented command in production's environment
def test_the_documented_web_command_under_load_holds_a_bounded_number_of_connections(stack, people):
    base, command = start_web(stack)
    workers = int(command[command.index("--workers") + 1])
    bound = workers * CONCURRENCY  # 4 × 4, docs/operations.md "Database connections"
    seed, _ = services.execution_start(
        user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"}
    )
    token = people["requester"].token
    calls = {
        "anonymous": lambda s, n: s.get(f"{base}/api/executions" if n % 2 else f"{base}/login/", timeout=60),
        "fake_token": lambda s, n: s.get(
            f"{base}/api/executions", headers={"Authorization": f"Bearer keel_madeup{n:08d}"}, timeout=60
        ),
        "read": lambda s, n: s.get(
            f"{base}/api/executions/{seed.ref}", headers={"Authorization": f"Bearer {token}"}, timeout=60
        ),
        "start": lambda s, n: s.post(
            f"{base}/api/executions",
            json={"workflow": "monthly_report", "input": {"month": "2026-08"}},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        ),
    }
    work = [(kind, n) for kind, count in MIX.items() for n in range(count)]
    random.Random(38).shuffle(work)
    answers: Counter[tuple[str, int]] = Counter()
    lock = threading.Lock()

    def client(share: list[tuple[str, int]]) -> None:
        session = http()
        session.headers.update(PROXY)
        for kind, n in share:
            if count.over.is_set():
                return  # the bound is passed: stop loading the machine's PostgreSQL
            status = calls[kind](session, n).status_code
            with lock:
                answers[kind, status] += 1

    started = time.monotonic()
    with ConnectionCount(bound) as count:
        threads = [threading.Thread(target=client, args=(work[i::CLIENTS],)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    took = time.monotonic() - started

    assert not count.over.is_set() and count.most <= bound, (
        f"the web held {count.most} connections (bound {bound}) after {sum(answers.values())} requests"
    )
    assert count.samples > 50 and count.most >= 1, "the count saw the web's connections at work"
    assert sum(answers.values()) == len(work) == 2100
    assert not [key for key in answers if key[1] >= 500], answers
    assert answers == {
        ("anonymous", 401): MIX["anonymous"] // 2,
        ("anonymous", 200): MIX["anonymous"] // 2,
        ("fake_token", 401): MIX["fake_token"],
        ("read", 200): MIX["read"],
        ("start", 201): MIX["start"],
    }, answers
    # Released, not kept: once the load is over the web holds none (30 s: on a loaded machine the last
    # connections of the load close a few seconds after its answers arrive).
    try:
        wait_for(lambda: count.now() == 0, timeout=30, what="the web's connections to be closed after the load")
    except AssertionError:
        raise AssertionError(f"still held after the load: {count.held()}") from None
    print(f"{len(work)} requests from {CLIENTS} clients in {took:.1f} s; at most {count.most} connections")


def raw(port: int, data: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if data:
        sock.sendall(data)
    return sock


def read_until_closed(sock: socket.socket, *, within: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed (s)."""
    sock.settimeout(within)
    started, data = time.monotonic(), b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        raise AssertionError(f"the connection was still open after {within} s; got {data[:200]!r}") from None
    except ConnectionResetError:
        pass
    finally:
        sock.close()
    return data, time.monotonic() - started


@pytest.mark.own_stack  # the documented command, with short deadlines
def test_a_stalled_body_is_a_408_in_json_and_idle_connections_are_closed(stack, people):
    base, _ = start_web(stack, KEEL_WEB_BODY_SECONDS="1", KEEL_WEB_IDLE_SECONDS="1")
    port = int(base.rsplit(":", 1)[1])
    head = (
        b"POST /api/executions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Proto: https\r\n"
        b"Authorization: Bearer " + people["requester"].token.encode() + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
    )
    stalled = raw(port, head + b'{"workflow": "monthly_report", ')  # then nothing
    answer, after = read_until_closed(stalled, within=8)
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status_line == b"HTTP/1.1 408 Request Timeout", answer[:300]
    assert b"content-type: application/json" in headers.lower() and b"connection: close" in headers.lower()
    assert json.loads(body) == {
        "detail": "the request's body stopped arriving: nothing came for 1 s",
        "timeout_seconds": 1.0,
    }
    assert 0.8 < after < 5, after

    # Nothing sent, half a head sent: closed without a word once KEEL_WEB_IDLE_SECONDS pass.
    for sent in (b"", b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"):
        data, after = read_until_closed(raw(port, sent), within=8)
        assert data == b"" and 0.8 < after < 5, (sent, data, after)

    # Idle after an answer: gunicorn's --keep-alive (2 s by default) closes it.
    kept = raw(port, b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-Proto: https\r\n\r\n")
    data, after = read_until_closed(kept, within=10)
    assert data.startswith(b"HTTP/1.1 200 ") and after < 6, (data[:100], after)

    # Nothing was started, and the server still answers at once.
    assert http().get(f"{base}/login/", headers={"X-Forwarded-Proto": "https"}, timeout=5).status_code == 200
    assert not Execution.objects.exists()
