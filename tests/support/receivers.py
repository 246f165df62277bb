"""Real local receivers for what keel sends out (issue 22): a webhook endpoint over HTTP
and an SMTP server (aiosmtpd), each in a thread of the pytest process. Nothing mocked:
keel's processes reach them over the network like any receiver."""

from __future__ import annotations

import gzip
import hashlib
import hmac
import json
import socket
import threading
import time
import zlib
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
                    seen = {
                        "key": key,
                        "signature": signed,
                        "body": body,
                        "code": code,
                        "method": "POST",
                        "path": self.path,
                    }
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


class _Receiver:
    """An HTTP server in a thread of the pytest process that keeps what ``take(path,
    headers, body)`` makes of each POST and answers 200; ``stop`` closes its socket (a
    collector gone mid-run), ``start`` opens it again on the same port."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.port = free_port()
        self.posts = 0
        self.hang = False  # read each request, then never answer (a collector stuck)
        self.server: ThreadingHTTPServer | None = None
        self.start()

    def take(self, path: str, headers, body: bytes) -> None:
        raise NotImplementedError

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                with receiver.lock:
                    receiver.posts += 1
                    if not receiver.hang:
                        receiver.take(self.path, self.headers, body)
                if receiver.hang:
                    time.sleep(120)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    close = stop


class OtlpReceiver(_Receiver):
    """An OpenTelemetry collector's OTLP/HTTP traces endpoint (``/v1/traces``): decodes each
    ``ExportTraceServiceRequest`` (protobuf) and keeps its spans as plain dicts: ``name``,
    ``trace_id`` and ``span_id`` (hex), ``parent`` (hex, "" for a root), ``links``
    (trace id, span id), ``attributes``, ``events``, ``service``, ``status``."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        super().__init__()
        self.url = f"http://127.0.0.1:{self.port}"

    def take(self, path: str, headers, body: bytes) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        if path != "/v1/traces":
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            service = {a.key: _value(a.value) for a in resource.resource.attributes}.get("service.name")
            for scope in resource.scope_spans:
                for span in scope.spans:
                    self.spans.append(
                        {
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent": span.parent_span_id.hex(),
                            "links": [(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                            "attributes": {a.key: _value(a.value) for a in span.attributes},
                            "events": [e.name for e in span.events],
                            "service": service,
                            "status": span.status.code,
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                        }
                    )

    def of_trace(self, trace_id: str) -> list[dict]:
        with self.lock:
            return [s for s in self.spans if s["trace_id"] == trace_id]


def _value(value) -> object:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class SentryReceiver(_Receiver):
    """Sentry's ingestion endpoint (``/api/<project>/envelope/``): keeps the event of each
    envelope (its header line, the item header, the JSON payload) as a dict."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        super().__init__()
        self.dsn = f"http://publickey@127.0.0.1:{self.port}/42"

    def take(self, path: str, headers, body: bytes) -> None:
        if not path.startswith("/api/42/"):
            return
        pos = body.index(b"\n") + 1  # after the envelope's header
        while pos < len(body):
            end = body.find(b"\n", pos)
            end = len(body) if end < 0 else end
            if end == pos:
                pos += 1
                continue
            item = json.loads(body[pos:end])
            pos = end + 1
            if "length" in item:
                payload, pos = body[pos : pos + item["length"]], pos + item["length"] + 1
            else:
                stop = body.find(b"\n", pos)
                stop = len(body) if stop < 0 else stop
                payload, pos = body[pos:stop], stop + 1
            if item.get("type") in ("event", "transaction"):
                self.events.append(json.loads(payload))
