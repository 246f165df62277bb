"""A fresh Python process's view of the settings, for the tests of what the environment
decides (the secret key, the security settings): an environment without ours, and code
run after ``django.setup()``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.procs import ROOT

PRINT_KEY = "from django.conf import settings; print(settings.SECRET_KEY)"


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "KEEL_", "SECURE_")) and k not in ("DATABASE_URL", "CELERY_BROKER_URL")
    }
    env.update(DJANGO_SETTINGS_MODULE="config.settings", KEEL_VAR_DIR=str(tmp_path / "var"), **extra)
    return env


def django(env: dict[str, str], code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
