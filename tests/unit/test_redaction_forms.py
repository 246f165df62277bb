"""Redaction of a configured secret in every form something outside may echo it back
(issue 38, item 9.1; executions/redaction/forms.py), as pure logic: encoded whole (base64
in either alphabet and at every alignment, percent-encoding full and partial, hex,
reversed) and in pieces of half the secret or more — and nothing else."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets

import pytest

from executions.redaction import redact, redact_text
from executions.redaction.forms import MIN_PIECE, Forms, piece_length
from sandbox.echo import encodings
from tests.support.leaks import leaks

# No "sk-" (the credential shape would hide a miss of the secrets list) and both "-" and "_".
KEY = "kq-" + secrets.token_urlsafe(33).replace("-", "A").replace("_", "B") + "-x_y"
MARK = "[redacted: OPENAI_API_KEY]"


def encoded(key: str) -> dict[str, str]:
    """Every form the probe found a provider echoing, and a few more (sandbox/echo.py)."""
    return encodings(key)


@pytest.fixture
def configured(settings):
    settings.SECRETS = {"OPENAI_API_KEY": KEY, "KEEL_WEBHOOK_SECRET": "webhook-secret-for-the-tests"}


@pytest.mark.parametrize("form", list(encoded(KEY)))
def test_every_encoded_form_of_a_configured_secret_is_redacted(configured, form):
    text = f"upstream error for {encoded(KEY)[form]} (quoted)"
    out = redact_text(text)
    assert not leaks(out, KEY), (form, out)
    assert MARK in out and out.startswith("upstream error for ") and out.endswith(" (quoted)")


def test_a_key_inside_longer_base64_is_found_at_every_alignment(configured):
    """Whatever precedes it, every character the key's bytes alone decide is replaced: what
    is left on either side shares at most one character with the key's bits."""
    n = len(KEY.encode())
    for prefix in (b"", b"a", b"ab", b"abc", b"Authorization: Bearer "):
        blob = base64.b64encode(prefix + KEY.encode() + b" and the rest of the body").decode()
        left, right = redact_text(f"payload={blob}").removeprefix("payload=").split(MARK)
        assert len(left) <= -(-8 * len(prefix) // 6), prefix
        assert len(left) + len(right) <= len(blob) - (8 * (len(prefix) + n) // 6 - -(-8 * len(prefix) // 6)), prefix


def test_a_piece_is_replaced_up_to_where_the_key_ends(configured):
    """A piece is found by its first half-key's worth and then followed to its end: nothing
    of the run is left, and what follows it stays."""
    out = redact_text(f"key={KEY[5:]}; next")
    assert out == f"key={MARK}; next"
    assert redact_text(f"{KEY[:30]}\n{KEY[30:]}") == f"{MARK}\n{KEY[30:]}"  # cut in two: the long part goes


def test_short_secrets_have_no_pieces_and_ordinary_text_stays(settings):
    settings.SECRETS = {"DATABASE_URL": "hunter22", "EMAIL_HOST_PASSWORD": "a-longer-password-01"}
    assert piece_length(8) is None and piece_length(20) == MIN_PIECE and piece_length(48) == 24
    assert redact_text("hunter2 and hunter22") == "hunter2 and [redacted: DATABASE_URL]"
    assert redact_text("a-longer-pas") == "[redacted: EMAIL_HOST_PASSWORD]"  # 12 of 20: a piece
    assert redact_text("a-longer-pa") == "a-longer-pa"  # 11: ordinary text
    ordinary = json.dumps(
        {
            "sha256": hashlib.sha256(b"report").hexdigest(),
            "text": "The order ORD-1001 was shipped to Ana Pereira on 2026-08-01; total 12.50 EUR.",
            "id": "chatcmpl-" + secrets.token_hex(12),
        }
    )
    assert redact_text(ordinary) == ordinary


def test_pieces_shorter_than_half_the_key_stay(configured):
    half = (len(KEY) + 1) // 2
    assert redact_text(KEY[: half - 1]) == KEY[: half - 1]


def test_json_values_are_redacted_in_every_form(configured):
    forms = encoded(KEY)
    out = redact({"error": {"message": forms["base64"], "detail": [forms["hex"], {"x": forms["reversed"]}]}})
    assert not leaks(json.dumps(out), KEY) and json.dumps(out).count(MARK) == 3


def test_the_same_value_under_two_names_and_a_secret_inside_another():
    outer = "outer-" + "Z" * 20 + "-secret-value"
    forms = Forms([("OUTER", outer), ("INNER", "Z" * 20), ("ALIAS", outer)])
    assert forms.sub(f"[{outer}] [{'Z' * 20}]", lambda name: f"<{name}>") == "[<OUTER>] [<INNER>]"
