"""Completion marks for end-to-end benchmarks, written by the worker to Redis.

When ``KEEL_BENCH_MARKS`` names a Redis URL, every ``executions.advance`` task that
returns leaves a mark after it returned (so after its last commit): the list
``keel-bench:done:<execution id>`` gets ``"<result> <unix time>"``, and for a slice
that stopped the execution, ``keel-bench:count`` is incremented and
``keel-bench:last`` set to that time. Clients block on the list (closed loop) or
wait for the count (open loop) without polling the database, the way the peers'
bare Celery chain marks its last task. Off (nothing connected) without the variable.
"""

from __future__ import annotations

import os
import time

PREFIX = "keel-bench"


def done_key(execution_id: int) -> str:
    return f"{PREFIX}:done:{execution_id}"


def wait_done(client, execution_id: int, timeout: float = 120) -> float:
    """Block on ``client`` (Redis) until the task that stopped ``execution_id`` marked it;
    the mark's time (the worker's clock, after the task's last commit)."""
    while True:
        item = client.blpop([done_key(execution_id)], timeout=timeout)
        if item is None:
            raise SystemExit(f"benchmark: execution {execution_id} not done after {timeout} s")
        result, at = item[1].decode().split()
        if result == "stopped":
            return float(at)


def connect() -> None:
    url = os.environ.get("KEEL_BENCH_MARKS")
    if not url:
        return
    import redis
    from celery.signals import task_postrun

    client = redis.Redis.from_url(url)

    def mark(sender=None, args=None, retval=None, **kwargs) -> None:
        if getattr(sender, "name", "") != "executions.advance" or not args:
            return
        now = time.time()
        pipe = client.pipeline()
        pipe.rpush(done_key(args[0]), f"{retval} {now!r}")
        if retval == "stopped":
            pipe.incr(f"{PREFIX}:count")
            pipe.set(f"{PREFIX}:last", repr(now))
        pipe.execute()

    task_postrun.connect(mark, weak=False, dispatch_uid="keel-bench-marks")
