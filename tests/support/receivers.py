"""Real local receivers for what keel sends out (issue 22): a webhook endpoint over HTTP
and an SMTP server (aiosmtpd), each in a thread of the pytest process. Nothing mocked:
keel's processes reach them over the network like any receiver."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebhookReceiver:
    """Answers POSTs: the next of ``answers`` (then 200) — a code, or ``(code, headers,
    body)`` for a redirect or an answer of any size — with ``echo`` in the answer when set
    (a careless receiver quoting a secret). Keeps every request (GETs too, answered 404),
    and one *delivery* per ``Idempotency-Key`` (a receiver that honours the key)."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.requests: list[dict] = []
        self.deliveries: dict[str, dict] = {}
        self.answers: list[int | tuple[int, dict[str, str], bytes]] = []
        self.echo: str | None = None
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                key = self.headers.get("Idempotency-Key", "")
                signed = self.headers.get("X-Keel-Signature", "")
                with receiver.lock:
                    answer = receiver.answers.pop(0) if receiver.answers else 200
                    code, headers, payload = (answer, {}, None) if isinstance(answer, int) else answer
                    seen = {"key": key, "signature": signed, "body": body, "code": code, "method": "POST"}
                    receiver.requests.append(seen)
                    if code < 300:
                        receiver.deliveries.setdefault(key, seen)
                said = {"echo": receiver.echo} if receiver.echo else {}
                self._answer(code, headers, payload or json.dumps({"ok": code < 300, **said}).encode())

            def do_GET(self) -> None:
                with receiver.lock:
                    receiver.requests.append({"key": "", "body": b"", "code": 404, "method": "GET", "path": self.path})
                self._answer(404, {}, b'{"error": "not found"}')

            def _answer(self, code: int, headers: dict[str, str], payload: bytes) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client read what it wanted (a bounded read) and left

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/keel"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def verified(self, seen: dict) -> bool:
        """The receiver's check, as docs/operations.md shows it."""
        expected = "sha256=" + hmac.new(self.secret.encode(), seen["body"], hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, seen["signature"])

    def events(self, ref: str | None = None) -> list[dict]:
        with self.lock:
            found = [json.loads(d["body"]) | {"_key": k} for k, d in self.deliveries.items()]
        return [e for e in found if ref is None or e["execution"]["id"] == ref]

    def close(self) -> None:
        self.server.shutdown()


class Mailbox:
    """A local SMTP server (aiosmtpd) keeping every message it accepted."""

    def __init__(self) -> None:
        self.messages: list = []
        self.lock = threading.Lock()
        mailbox = self

        class Handler:
            async def handle_DATA(self, server, session, envelope) -> str:
                with mailbox.lock:
                    mailbox.messages.append(message_from_bytes(envelope.original_content or envelope.content))
                return "250 Message accepted for delivery"

        self.controller = Controller(Handler(), hostname="127.0.0.1", port=free_port())
        self.controller.start()
        self.port = self.controller.port

    def to(self, address: str) -> list:
        with self.lock:
            return [m for m in self.messages if address in m["To"]]

    def close(self) -> None:
        self.controller.stop()
