"""A person's own notification settings: the one write the account page and the API share."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from executions.errors import InvalidInput

from .models import Preference


@dataclass(frozen=True, kw_only=True)
class Settings:
    email: str
    email_notifications: bool

    def as_dict(self) -> dict:
        return {"email": self.email, "email_notifications": self.email_notifications}


def notification_settings(*, user: AbstractBaseUser) -> Settings:
    preference = Preference.objects.filter(user=user).first()
    return Settings(email=user.email, email_notifications=preference.email if preference else True)


def notification_settings_update(
    *, user: AbstractBaseUser, email_notifications: bool | None = None, email: str | None = None
) -> Settings:
    """Turn e-mails on or off, or change the address (validated: InvalidInput naming
    ``email``, nothing written). A message already planned is not sent once they are off."""
    if email is not None:
        email = email.strip()
        if email:
            try:
                validate_email(email)
            except ValidationError:
                raise InvalidInput("email", f"{email!r} is not an e-mail address") from None
    with transaction.atomic():
        if email is not None and email != user.email:
            user.email = email
            user.save(update_fields=["email"])
        if email_notifications is not None:
            Preference.objects.update_or_create(user=user, defaults={"email": email_notifications})
    return notification_settings(user=user)
