"""The web command's gunicorn worker class (docs/operations.md, "The web server"):
``gunicorn config.asgi --worker-class config.web_worker.ASGIWorker …``.

gunicorn's ``asgi`` worker, with one thing more: a connection must send its first
request's head within ``KEEL_WEB_IDLE_SECONDS`` (default 10) of opening, or it is closed.
gunicorn closes a connection idle *between* requests after ``--keep-alive`` (2 s by
default), but waits for a connection's first request for ever — an idle or half-sent
connection was never closed (issue 38), and each holds a socket and a file descriptor of
the worker. The body is ``config.admission``'s: a body that stalls is answered 408.

gunicorn 27 makes each connection's protocol in ``ASGIWorker._serve`` from the module
name ``gunicorn.workers.gasgi.ASGIProtocol``, with no setting to choose another. So this
worker, once forked (``init_process``, in its own process only), points that name at
``IdleClosingProtocol``; ``tests/integration/test_web_edge.py`` fails if a gunicorn
upgrade stops it from closing. It imports no Django at load: the master imports it.
"""

from __future__ import annotations

from gunicorn.asgi.protocol import ASGIProtocol
from gunicorn.workers import gasgi


def idle_seconds() -> float:
    """``KEEL_WEB_IDLE_SECONDS``, from the settings the application loaded."""
    from django.conf import settings

    return float(settings.KEEL_WEB_IDLE_SECONDS)


class IdleClosingProtocol(ASGIProtocol):
    """gunicorn's HTTP/1 protocol, closing a connection whose first request's head is not in
    within ``idle_seconds()`` of its opening (nothing sent, or a head sent in part)."""

    def __init__(self, worker) -> None:
        super().__init__(worker)
        self._head_deadline = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        if self._request_ready is not None:  # HTTP/1 (the only protocol the web command speaks)
            self._head_deadline = self.worker.loop.call_later(idle_seconds(), self._no_head_in_time)

    def _on_headers_complete(self):
        self._cancel_head_deadline()
        return super()._on_headers_complete()

    def connection_lost(self, exc) -> None:
        self._cancel_head_deadline()
        super().connection_lost(exc)

    def _cancel_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _no_head_in_time(self) -> None:
        self._head_deadline = None
        if self._current_request is None and not self._closed:
            self._keepalive_timeout()  # gunicorn's own idle close: the transport, and its loop woken


class ASGIWorker(gasgi.ASGIWorker):
    """gunicorn's ``asgi`` worker whose connections are ``IdleClosingProtocol``."""

    def init_process(self) -> None:
        gasgi.ASGIProtocol = IdleClosingProtocol  # this worker process only (module docstring)
        super().init_process()
