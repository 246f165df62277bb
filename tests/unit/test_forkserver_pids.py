"""The fork server's client (tests/support/forkserver.py) tells apart two children that got
the same pid: pids wrap (at 32768 on these machines), and a long run forks more children
than that. The exit of the first must never be read as the second's (which then looks
dead while it runs on, or is SIGKILLed by a harness that trusts it)."""

from __future__ import annotations

import io
import threading

from tests.support import forkserver


class _Stdout:
    def __init__(self, lines: list[str]) -> None:
        self.stdout = io.BytesIO("".join(f"{line}\n" for line in lines).encode())


def server(lines: list[str]) -> forkserver._Server:
    """A client that read ``lines`` from its server (the real reader), the server still up."""
    s = object.__new__(forkserver._Server)
    s.exits, s.births, s._pids, s.dead = {}, {}, [], False
    s.changed, s._lock = threading.Condition(), threading.Lock()
    s.popen = _Stdout(lines)
    s._read()
    s.dead = False  # the stream ended, as if the server had died: it hasn't
    return s


def child(s: forkserver._Server, pid: int, birth: int) -> forkserver.Forked:
    forked = object.__new__(forkserver.Forked)
    forked.args, forked._server, forked.pid, forked._birth, forked.returncode = [], s, pid, birth, None
    return forked


def test_a_reused_pid_is_a_new_child_until_it_exits():
    s = server(["pid 4242", "exit 4242 -9", "pid 4242"])
    first, second = child(s, 4242, 1), child(s, 4242, 2)
    assert first.poll() == -9
    assert second.poll() is None  # alive, whatever the first did
    s.exits[(4242, 2)] = 0
    assert second.poll() == 0 and first.poll() == -9


def test_the_reader_counts_births_per_pid():
    s = server(["pid 7", "exit 7 1", "pid 7", "pid 8"])
    assert s.births == {7: 2, 8: 1}
    assert s.exits == {(7, 1): 1}
    assert s._pids == [7, 7, 8]
