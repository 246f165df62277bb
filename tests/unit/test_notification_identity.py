"""Issue 22: what makes a notification the same message on every attempt — its
Message-ID comes from the ledger key — and a webhook's signature over the exact body."""

from __future__ import annotations

import hashlib
import hmac

from notifications import mail, webhooks


def test_the_message_id_is_the_keys_on_every_attempt():
    key = "approval:12:notify:manager:opened"
    assert mail.message_id(key) == mail.message_id(key)
    assert mail.message_id(key) != mail.message_id("approval:12:notify:manager:reminder")
    assert mail.message_id(key).startswith("<") and mail.message_id(key).endswith("@localhost>")


def test_the_signature_is_hmac_sha256_of_the_body_bytes():
    body = b'{"event":"execution.failed"}'
    expected = hmac.new(b"s3cret-value", body, hashlib.sha256).hexdigest()
    assert webhooks.signature(body, "s3cret-value") == f"sha256={expected}"
    assert webhooks.signature(body + b" ", "s3cret-value") != f"sha256={expected}"
