"""Issue 18, item 3: slow request bodies against the shipped production command.

Forty anonymous connections each declare a 900 kB ``POST /login/`` body and send one
byte of it; meanwhile ``GET /login/`` must still be answered at once. The command is
read from docs/operations.md's process table (and the Procfile's web line), so what is
tested is what operators run. Under sync or threaded workers each such connection holds
a worker or a thread while its body trickles in, and the GET waits for them."""

from __future__ import annotations

import socket
import time

import pytest

from tests.support.procs import free_port, http, responds
from tests.support.web_command import documented_web_command, on_port, procfile_web_command

SLOW_CONNECTIONS = 40


def slow_body(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(
        b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: 900000\r\n\r\nu"
    )
    return sock


@pytest.mark.parametrize("source", [documented_web_command, procfile_web_command], ids=["docs", "procfile"])
@pytest.mark.own_stack  # it starts the web server with production's command line
def test_slow_bodies_do_not_stall_the_production_web_command(stack, source):
    port = free_port()
    web = stack.start("web", on_port(source(), port))
    web.wait_until(lambda: responds(f"http://127.0.0.1:{port}/login/"), what="the web server to listen")
    attackers = [slow_body(port) for _ in range(SLOW_CONNECTIONS)]
    try:
        time.sleep(1)  # every body is now trickling in
        started = time.monotonic()
        answer = http().get(f"http://127.0.0.1:{port}/login/", timeout=30)
        waited = time.monotonic() - started
        assert answer.status_code == 200
        # Not a benchmark: a stalled server answers in tens of seconds, a sound one at once.
        assert waited < 10, f"GET /login/ waited {waited:.1f} s behind {SLOW_CONNECTIONS} slow bodies"
    finally:
        for sock in attackers:
            sock.close()
    assert web.alive()
