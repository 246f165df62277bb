"""The API kit: what every part of the Task API shares, beside ``accounts`` at the bottom.

- ``auth``: the two ways a request is signed in — a bearer token (``BearerToken``) and
  the browser's session, CSRF-checked on writes (``BrowserSession``);
- ``answers``: the error shape every refusal answers with (``ErrorOut``, ``{"detail"}``)
  and the answers each kind of operation can give besides its success (``READ``,
  ``READ_ONE``, ``WRITE``, ``WRITE_ONE``: docs/api.md);
- ``sharing``: one django-ninja response wrapper per schema, applied once when the app
  is ready (``apps.ApiKitConfig``), never as an import's side effect.

Imports ninja and ``accounts``; imported by every app's ``api.py`` and ``config.api``.
"""
