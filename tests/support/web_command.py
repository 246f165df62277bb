"""The web server's command line as operators run it: read from docs/operations.md's process
table and from the Procfile's ``web:`` line, so a test of it tests what is documented."""

from __future__ import annotations

import re
import shlex

from tests.support.procs import BIN, ROOT


def documented_web_command() -> list[str]:
    table = (ROOT / "docs" / "operations.md").read_text()
    found = re.search(r"^\| web \| `(gunicorn [^`]+)`", table, re.M)
    assert found, "docs/operations.md names no web command"
    return shlex.split(found.group(1))


def procfile_web_command() -> list[str]:
    line = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("web:"))
    return shlex.split(line.removeprefix("web:"))


def on_port(command: list[str], port: int) -> list[str]:
    """``command`` bound to ``port`` of 127.0.0.1, its program from this environment."""
    args = list(command)
    args[args.index("--bind") + 1] = f"127.0.0.1:{port}"
    return [str(BIN / args[0]), *args[1:]]
