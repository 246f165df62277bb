"""The hot path with tracing off and on (issue 44): the in-process 5-step no-op workflow of
bench/hotpath.py, run in a fresh process per pass — without ``OTEL_*`` (tracing off: the
SDK is never imported) and with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at a local
OTLP/HTTP sink in this process (every span exported, batched, as in production) —
alternately, three passes each; the median of each. Writes the "tracing" section of
docs/BENCHMARKS.md.

    .venv/bin/python bench/tracing.py [N]        (N workflows per pass, default 400)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import doc, harness

DB = os.environ.get("BENCH_TRACING_DB", "keel_bench_tracing")
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/13")
WORKFLOW, STEPS, WARMUP, PASSES = "bench_noop5", 5, 50, 3

harness.configure(db=DB, broker=BROKER)


def child(n: int) -> None:
    """One pass in this process: warm up, then N workflows; prints ms per workflow."""
    import django

    django.setup()
    from executions.engine import tracing

    harness.eager_starts(WARMUP, workflow=WORKFLOW, first=-WARMUP)
    per_workflow = harness.eager_starts(n, workflow=WORKFLOW) / n * 1000
    tracing.flush()
    print(json.dumps({"ms": per_workflow, "tracing": tracing.enabled(), "sdk": "opentelemetry.sdk" in sys.modules}))


def helpers() -> None:
    """What tracing off adds to one step, measured alone: the ``keel.step`` wrapper, its
    outcome, and the slice's trace id for the logs (µs per step, median of 5)."""
    import timeit

    import django

    django.setup()
    from django.utils import timezone

    from executions.engine import tracing
    from executions.models import Execution

    execution = Execution(pk=42, workflow=WORKFLOW, workflow_version=1, created_at=timezone.now())

    def one_step() -> None:
        with tracing.step(execution, "a", lambda: 1):
            tracing.outcome("succeeded", **{"keel.attempt": 1})
        tracing.trace_id_of(execution)

    runs = [timeit.timeit(one_step, number=20000) / 20000 * 1e6 for _ in range(5)]
    print(json.dumps({"us": statistics.median(runs)}))


class Sink:
    """An OTLP/HTTP receiver that counts what it is sent (the bench doesn't decode it)."""

    def __init__(self) -> None:
        self.posts = self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                sink.posts, sink.bytes = sink.posts + 1, sink.bytes + len(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def run_pass(n: int, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(n)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        cwd=harness.ROOT,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[-1]) if args else int(os.environ.get("BENCH_TRACING_N", "400"))
    harness.recreate_database(DB)
    sink = Sink()
    on = {"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url, "OTEL_SERVICE_NAME": "keel-bench"}
    results: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(PASSES):
        for mode, env in (("off", {}), ("on", on)):
            found = run_pass(n, env)
            assert found["tracing"] == (mode == "on") and found["sdk"] == (mode == "on"), found
            results[mode].append(found["ms"])
    off, traced = statistics.median(results["off"]), statistics.median(results["on"])
    done = subprocess.run([sys.executable, __file__, "--helpers"], capture_output=True, text=True, check=True)
    helpers_us = json.loads(done.stdout.strip().splitlines()[-1])["us"]
    spans = (WARMUP + n) * PASSES * (STEPS + 2)  # a step span each, keel.start, the root
    lines = [
        "## Tracing off and on (`bench/tracing.py`, issue 44)",
        "",
        f"{harness.machine(DB)}; {time.strftime('%Y-%m-%d')}. N = {n} workflows of {STEPS} no-op steps per pass, "
        f"in-process (Celery eager), {PASSES} passes of each alternating, each in a fresh process; the median.",
        "",
        "| tracing | ms per workflow | steps/s | passes (ms per workflow) |",
        "|---|---|---|---|",
        f"| off (no `OTEL_*`: the SDK is never imported) | {off:.2f} | {STEPS * 1000 / off:.0f} | "
        + ", ".join(f"{v:.2f}" for v in results["off"])
        + " |",
        f"| on (every span exported over OTLP/HTTP to a local receiver) | {traced:.2f} | {STEPS * 1000 / traced:.0f} | "
        + ", ".join(f"{v:.2f}" for v in results["on"])
        + " |",
        "",
        f"Tracing on costs {traced - off:+.2f} ms per workflow ({(traced / off - 1) * 100:+.1f} %): "
        f"{(traced - off) * 1000 / (STEPS + 2):.0f} µs per span of the {STEPS + 2} a workflow makes (a `keel.step` per "
        f"step, `keel.start`, the root `keel.execution`), built, batched and sent by the SDK's exporter thread. "
        f"The receiver got {sink.posts} exports, {sink.bytes / 1024:.0f} KiB (~{spans} spans, "
        f"{sink.bytes / max(spans, 1):.0f} bytes each).",
        "",
        f"Tracing off, what the runtime adds per step, measured alone (`--helpers`: the `keel.step` wrapper, "
        f"its outcome, the slice's trace id for the logs): **{helpers_us:.2f} µs**, against "
        f"{off * 1000 / STEPS:.0f} µs per step above — below what one pass differs from the next.",
    ]
    doc.write_section("tracing", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    if "--child" in sys.argv:
        child(int(sys.argv[-1]))
    elif "--helpers" in sys.argv:
        helpers()
    else:
        main()
