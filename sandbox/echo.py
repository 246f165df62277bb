"""A careless service echoing a credential back, encoded (the ``echo_secret`` fault).

A provider that was sent a key may quote it in its answer not as sent but encoded: the
base64 of a ``Basic`` header, a URL's percent-encoding, a debug dump in hex, the
string reversed, half of it. ``encodings`` is every form a security probe saw, and a
few more; ``echo`` is the sentence the fault adds to an answer or an error.
"""

from __future__ import annotations

import base64
from urllib.parse import quote


def credential(headers: dict[str, str]) -> str | None:
    """The key a request carried (``Authorization: Bearer …`` or ``x-api-key``), if any."""
    authorization = headers.get("authorization", "")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() in ("bearer", "basic", "token") and value.strip():
        return value.strip()
    return headers.get("x-api-key") or None


def encodings(secret: str) -> dict[str, str]:
    """``secret`` in every form a careless service echoes it, by name."""
    data, n = secret.encode(), len(secret)
    return {
        "base64": base64.b64encode(data).decode(),
        "base64 without padding": base64.b64encode(data).decode().rstrip("="),
        "base64, URL-safe": base64.urlsafe_b64encode(data).decode(),
        "base64, URL-safe, without padding": base64.urlsafe_b64encode(data).decode().rstrip("="),
        "base64 after one byte": base64.b64encode(b":" + data + b";").decode(),
        "base64 after two bytes": base64.b64encode(b"k=" + data + b";;").decode(),
        "base64 of a Basic credential": base64.b64encode(b"sandbox:" + data).decode(),
        "percent-encoded, every byte": "".join(f"%{b:02X}" for b in data),
        "percent-encoded, every byte, lower case": "".join(f"%{b:02x}" for b in data),
        "percent-encoded, partly": "".join(f"%{b:02X}" if i % 3 == 1 else chr(b) for i, b in enumerate(data)),
        "percent-encoded (quote)": quote(secret, safe=""),
        "hex": data.hex(),
        "hex, upper case": data.hex().upper(),
        "reversed": secret[::-1],
        "first half": secret[: (n + 1) // 2],
        "second half": secret[n // 2 :],
        "a middle half": secret[n // 4 : n // 4 + (n + 1) // 2],
        "all but its last character": secret[:-1],
    }


def echo(secret: str) -> str:
    """The sentence the fault adds: every encoding, each named."""
    return "debug echo of the credential: " + "; ".join(f"{name}={form}" for name, form in encodings(secret).items())
