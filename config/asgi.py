import os
import sys

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
try:
    application = get_asgi_application()
except SystemExit as refused:  # start-up refused (a workflow module that doesn't import)
    if isinstance(refused.code, str):
        sys.stderr.write(refused.code + "\n")
    raise SystemExit(3) from None  # gunicorn's "worker failed to boot": the server stops, never loops
