"""The account's notification settings in the Task API (assembled in config.api)."""

from __future__ import annotations

from typing import Annotated

from django.http import HttpRequest
from ninja import Router, Schema
from pydantic import Field

from apikit.answers import READ, WRITE
from executions.inputs import Body
from executions.storable import STORABLE

from .services import notification_settings, notification_settings_update

router = Router()


class NotificationSettingsOut(Schema):
    email: str
    email_notifications: bool


class NotificationSettingsIn(Body):
    email_notifications: bool | None = None
    email: Annotated[str, Field(max_length=254), STORABLE] | None = None


@router.get("/account/notifications", response={200: NotificationSettingsOut, **READ}, tags=["account"])
def get_notification_settings(request: HttpRequest):
    """Your own address and whether you get e-mails about approvals."""
    return notification_settings(user=request.user).as_dict()


@router.put("/account/notifications", response={200: NotificationSettingsOut, **WRITE}, tags=["account"])
def put_notification_settings(request: HttpRequest, payload: NotificationSettingsIn):
    """Turn your e-mails off (or on), or change your address (an invalid one: 422 naming ``email``)."""
    return notification_settings_update(
        user=request.user, email_notifications=payload.email_notifications, email=payload.email
    ).as_dict()
