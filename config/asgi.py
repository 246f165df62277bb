"""The web server's application (docs/operations.md, "The web server"): Django behind
``config.admission`` — at most ``KEEL_WEB_CONCURRENCY`` requests of this process inside
Django at once, each let in only once its body has arrived, and a body that stalls for
``KEEL_WEB_BODY_SECONDS`` answered 408.

Under ASGI every request runs in a thread of its own, so a database connection kept past
its request is never used again and piles up: this module says it serves ASGI before the
settings load (``KEEL_SERVES_ASGI``), and config/settings.py then closes each connection
at the end of its request (``CONN_MAX_AGE`` 0).
"""

import os
import sys

from django.conf import settings
from django.core.asgi import get_asgi_application

from config.admission import Admission

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ["KEEL_SERVES_ASGI"] = "1"  # read by config/settings.py: connections end with their request
try:
    django_application = get_asgi_application()
except SystemExit as refused:  # start-up refused (a workflow module that doesn't import)
    if isinstance(refused.code, str):
        sys.stderr.write(refused.code + "\n")
    raise SystemExit(3) from None  # gunicorn's "worker failed to boot": the server stops, never loops

application = Admission(
    django_application, concurrency=settings.KEEL_WEB_CONCURRENCY, body_seconds=settings.KEEL_WEB_BODY_SECONDS
)
