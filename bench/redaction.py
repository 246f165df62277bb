"""Redaction's cost (issue 38, item 9.1): ``redact_text`` on what it meets — a model's
answer, a prompt, an answer of the largest size read (``ANSWER_LIMIT``), a base64 blob
(long runs of the characters the encoded forms use: the prefilter's worst case) — with
no secret configured (the credential shapes alone) and with seven (every form of each:
``executions/redaction/forms.py``). Pure CPU, one process. Writes the "redaction"
section of docs/BENCHMARKS.md.

    .venv/bin/python bench/redaction.py
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402

from bench import doc  # noqa: E402
from executions.authoring.http import ANSWER_LIMIT  # noqa: E402
from executions.redaction import _secrets, redact_text  # noqa: E402

SECRETS = {
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "OPENAI_API_KEY": "sk-proj-" + secrets.token_urlsafe(36),
    "ANTHROPIC_API_KEY": "sk-ant-api03-" + secrets.token_urlsafe(70),
    "RUNTIME_METRICS_TOKEN": secrets.token_hex(16),
    "KEEL_WEBHOOK_SECRET": secrets.token_urlsafe(24),
    "DATABASE_URL": "pg-" + secrets.token_urlsafe(12),
    "EMAIL_HOST_PASSWORD": "mail pass " + secrets.token_hex(4),
}
SENTENCE = (
    "The replacement order ORD-1001 for Ana Pereira (ana@example.com) was submitted: 1 x SKU-MUG-01, shipped to "
    "Rua Augusta 12, Lisbon. Revenue for 2026-08 was 1,284,311.20 EUR, up 4.2 % on July; the Porto store led. "
)
TEXTS = {
    "a model's answer (JSON, 0.6 KB)": json.dumps(
        {"choices": [{"message": {"content": SENTENCE * 2}}], "usage": {"prompt_tokens": 1234}}
    ),
    "a prompt (prose, 6 KB)": SENTENCE * 30,
    f"an answer of {ANSWER_LIMIT // 1024} KB (prose and JSON)": (SENTENCE + json.dumps({"id": "x" * 8}))
    * (ANSWER_LIMIT // (len(SENTENCE) + 13)),
    "a base64 blob (64 KB)": base64.b64encode(secrets.token_bytes(48 * 1024)).decode(),
}


def per_call_ms(text: str) -> float:
    rounds = max(3, int(200_000 / max(len(text), 1)))
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(rounds):
            redact_text(text)
        samples.append((time.perf_counter() - started) * 1000 / rounds)
    return statistics.median(samples)


def main() -> None:
    rows = []
    for label, text in TEXTS.items():
        settings.SECRETS = {}
        shapes = per_call_ms(text)
        settings.SECRETS = SECRETS
        every = per_call_ms(text)
        rows.append(f"| {label} | {shapes:.3f} | {every:.3f} | {(every - shapes) / len(text) * 1e6:.0f} |")
    _secrets.cache_clear()
    re.purge()
    started = time.perf_counter()
    _secrets(tuple(sorted(SECRETS.items())))
    compiled = (time.perf_counter() - started) * 1000
    text = f"""## Redaction (`bench/redaction.py`, issue 38)

`redact_text`, median of 5 runs, ms per call, one process on a {os.cpu_count()}-core machine;
"every form" adds seven configured secrets (provider keys, a token, passwords — one with
a space, which makes every run of prose one the pattern is searched in: the prefilter's
worst case) in every form they can be echoed in (verbatim, percent-encoded, base64 at
three alignments in either alphabet, hex, reversed, pieces of half or more). Compiling
the one pattern for the seven: {compiled:.1f} ms, once per set of secrets.

| text | credential shapes only | and every form of 7 secrets | added, ns per character |
|---|---|---|---|
{chr(10).join(rows)}

Where it is paid: every model call stores its request and its answer redacted (a prompt
of a few KB: a couple of ms, beside the provider's hundreds), a receipt or a tool result
of a few hundred bytes about a tenth of a ms, an error's message and evidence when a
failure is made; a compute step that fails nothing pays nothing. An answer is never read
past `ANSWER_LIMIT`, so the last rows bound the worst case.
"""
    print(text)
    doc.write_section("redaction", text)


if __name__ == "__main__":
    main()
