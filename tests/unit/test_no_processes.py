"""``make test-fast`` starts no process: under ``KEEL_NO_PROCESSES`` the harness refuses,
naming the marker a test that needs one must carry."""

from __future__ import annotations

import pytest

from tests.support.procs import Proc


def test_no_process_starts_under_keel_no_processes(monkeypatch, tmp_path):
    monkeypatch.setenv("KEEL_NO_PROCESSES", "1")
    with pytest.raises(RuntimeError, match="mark the test `processes`"):
        Proc("sandbox", ["true"], {}, tmp_path / "sandbox.log")
    assert not (tmp_path / "sandbox.log").exists()
