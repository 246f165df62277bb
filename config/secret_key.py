"""The secret key when ``DJANGO_SECRET_KEY`` is not set (never outside production).

No key is ever published in the repository: the first process that needs one makes a
random key in ``$KEEL_VAR_DIR/secret_key`` (mode 0600), and every other process using
that directory reads the same file, so sessions and CSRF tokens hold across the web
server, workers and restarts.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

FILE_NAME = "secret_key"


def secret_key_in(directory: Path) -> str:
    """Reads the key kept in ``directory``, creating it atomically (first writer wins) if missing."""
    path = directory / FILE_NAME
    if not path.exists():
        scratch = directory / f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(50))
        try:
            os.link(scratch, path)  # atomic: a concurrent process either wins or reads ours
        except FileExistsError:
            pass
        finally:
            os.unlink(scratch)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise ImproperlyConfigured(f"{path} is readable by other users (mode {mode:o}); chmod 600 it.")
    key = path.read_text().strip()
    if len(key) < 50:
        raise ImproperlyConfigured(f"{path} holds no usable key (under 50 characters); delete it to make a new one.")
    return key
