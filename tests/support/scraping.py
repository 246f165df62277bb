"""The measures scraped as a monitoring system does: its token, the header, and how many
queries one scrape makes."""

from __future__ import annotations

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

TOKEN = "scrape-secret"


def bearer(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def queries(client: Client, path: str, token: str) -> int:
    client.get(path, **bearer(token))  # the token's last use is written once a minute: not measured
    with CaptureQueriesContext(connection) as captured:
        answer = client.get(path, **bearer(token))
    assert answer.status_code == 200, answer.content
    return len(captured)
