import os
import sys

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
try:
    application = get_wsgi_application()
except SystemExit as refused:  # start-up refused (a workflow module that doesn't import)
    if isinstance(refused.code, str):
        sys.stderr.write(refused.code + "\n")
    raise SystemExit(3) from None  # gunicorn's "worker failed to boot": the server stops, never loops
