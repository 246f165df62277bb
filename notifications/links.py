"""The pages a message links to, under ``KEEL_BASE_URL`` (what a person opens from an
e-mail, a chat room or a pager): one place for each, so mail and webhooks agree."""

from __future__ import annotations

from django.conf import settings


def approval(pk: int) -> str:
    return f"{settings.KEEL_BASE_URL}/approvals/{pk}/"


def execution(ref: str) -> str:
    return f"{settings.KEEL_BASE_URL}/executions/{ref}/"


def account() -> str:
    return f"{settings.KEEL_BASE_URL}/account/"
