"""A real OpenID provider for the single sign-on tests, and a tampering proxy in front of it.

``Provider`` runs ``provider.mjs`` (node-oidc-provider, installed by ``make install-test``
from this folder's lock file) as a process of its own, signing with a key the test made
(``signing_key``) and reading its people from a JSON file the test may rewrite between two
sign-ins (``Accounts``).

``TamperingProxy`` is a thread serving HTTP on a port of 127.0.0.1 whose address is the
provider's issuer: every request goes on to the provider unchanged (``Host`` kept, so the
provider's discovery names the proxy's endpoints) and every answer comes back unchanged —
except, in a ``mode`` other than ``pass``, the ``id_token`` of the token endpoint's answer,
rewritten (another audience, issuer, nonce, an expiry past, several audiences) and signed
again with the provider's own key, or signed by another key under the same ``kid``. keel
then runs its real callback and code exchange against a real provider over an adversarial
network. ``tampered`` counts the tokens it rewrote.
"""

from __future__ import annotations

import http.client
import json
import shutil
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.procs import Proc, free_port, responds

HERE = Path(__file__).resolve().parent
MODES = ("pass", "audience", "audiences", "issuer", "expired", "nonce", "key")
# What the proxy never passes on as it came: hop-by-hop, or recomputed for a rewritten body.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade"}


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private: rsa.RSAPrivateKey

    @property
    def jwks(self) -> str:
        """The private JWKS the provider signs with (``PROVIDER_JWKS``)."""
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private))
        return json.dumps({"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]})


def signing_key(kid: str = "provider-key") -> SigningKey:
    return SigningKey(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048))


class Accounts:
    """The provider's people, ``{"<subject>": {claims}}`` in a file it reads at every lookup."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.people: dict[str, dict[str, Any]] = {}
        self._write()

    def set(self, subject: str, **claims: Any) -> None:
        self.people[subject] = claims
        self._write()

    def _write(self) -> None:
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(self.people))
        partial.replace(self.path)  # never half a file for the provider to read


class TamperingProxy:
    """See the module's docstring. ``target`` is the provider's port (None: every request
    is answered 502, as a provider that is down behind a gateway)."""

    def __init__(self, *, client_id: str, key: SigningKey) -> None:
        self.client_id, self.key = client_id, key
        self.target: int | None = None
        self.mode = "pass"
        self.tampered = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="tampering-proxy", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def rewrite(self, id_token: str) -> str:
        """``id_token`` as the current mode makes it."""
        claims = jwt.decode(id_token, options={"verify_signature": False})
        now = int(time.time())
        changes: dict[str, dict[str, Any]] = {
            "audience": {"aud": "another-client"},
            "audiences": {"aud": [self.client_id, "another-client"]},
            "issuer": {"iss": "http://127.0.0.1:9/another-issuer"},
            "expired": {"iat": now - 900, "exp": now - 300},
            "nonce": {"nonce": "a-nonce-this-sign-in-never-sent"},
            "key": {},
        }
        claims.update(changes[self.mode])
        key = signing_key().private if self.mode == "key" else self.key.private
        return jwt.encode(claims, key, algorithm="RS256", headers={"kid": self.key.kid})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if proxy.target is None:
                    self.send_error(502, "the provider is down")
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                upstream = http.client.HTTPConnection("127.0.0.1", proxy.target, timeout=30)
                try:
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    answer = upstream.getresponse()
                    content = answer.read()
                    if self.command == "POST" and self.path.startswith("/token") and answer.status == 200:
                        content = proxy._tamper(content)
                    self.send_response(answer.status, answer.reason)
                    for name, value in answer.getheaders():
                        if name.lower() not in HOP_BY_HOP:
                            self.send_header(name, value)
                    self.send_header("Content-Length", str(len(content)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(content)
                finally:
                    upstream.close()

            do_GET = do_POST = do_HEAD = do_OPTIONS = _forward

        return Handler

    def _tamper(self, content: bytes) -> bytes:
        if self.mode == "pass":
            return content
        answer = json.loads(content)
        answer["id_token"] = self.rewrite(answer["id_token"])
        self.tampered += 1
        return json.dumps(answer).encode()


class Provider:
    """node-oidc-provider on a port of its own, issuing as ``issuer``, for one client."""

    def __init__(
        self,
        tmp: Path,
        *,
        issuer: str,
        client_id: str,
        client_secret: str,
        redirect_uri: str,
        key: SigningKey,
        accounts: Accounts,
    ) -> None:
        node = shutil.which("node")
        if node is None or not (HERE / "node_modules" / "oidc-provider").is_dir():
            raise RuntimeError(
                "the test OpenID provider needs node and its packages: make install-test "
                "(npm ci --prefix tests/support/oidc_provider)"
            )
        self.port = free_port()
        self.redirect_uri = redirect_uri
        env = {
            "PATH": f"{Path(node).parent}:/usr/bin:/bin",
            "PROVIDER_ISSUER": issuer,
            "PROVIDER_PORT": str(self.port),
            "PROVIDER_CLIENT_ID": client_id,
            "PROVIDER_CLIENT_SECRET": client_secret,
            "PROVIDER_REDIRECT_URIS": redirect_uri,
            "PROVIDER_JWKS": key.jwks,
            "PROVIDER_ACCOUNTS": str(accounts.path),
        }
        discovery = f"http://127.0.0.1:{self.port}/.well-known/openid-configuration"
        self.proc = Proc(
            "oidc-provider",
            [node, str(HERE / "provider.mjs")],
            env,
            tmp / f"oidc-provider-{self.port}.log",
            ready=lambda _: responds(discovery),
            what="the OpenID provider to answer",
        )
        self.proc.wait_ready()

    def close(self) -> None:
        self.proc.kill()
