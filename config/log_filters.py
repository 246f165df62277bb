"""Log filters of the project.

``RefusalsWithoutTraceback`` — Django logs every 403 (``PermissionDenied``) on
``django.request`` with the exception's whole traceback, as if it were a crash. A
refusal is the permission system working: one warning line (who asked for what, the
status) says all, and a log store isn't flooded with tracebacks nobody needs.
"""

from __future__ import annotations

import logging


class RefusalsWithoutTraceback(logging.Filter):
    """Keeps 4xx records of ``django.request`` but drops their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
