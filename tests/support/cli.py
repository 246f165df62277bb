"""``manage.py keel`` as the CLI tests run it, and what a refusal must look like: its exit
status and one sentence on stderr, never a traceback."""

from __future__ import annotations

import subprocess

from tests.support.procs import run_manage


def keel(env, *args: str) -> subprocess.CompletedProcess:
    return run_manage("keel", *args, env=env)


def refused(done: subprocess.CompletedProcess, status: int, *words: str) -> None:
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    sentence = done.stderr.strip()
    assert sentence and "\n" not in sentence and "Traceback" not in sentence, sentence
    for word in words:
        assert word in sentence, sentence
