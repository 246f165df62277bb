"""The channels keel tells people and other systems through, behind one registry: a
channel is its name (``Delivery.channel``), the ledger action type its deliveries are
recorded under, whether its receiver de-duplicates on the delivery's key, how one is
sent, and why one should no longer go. E-mail (``notifications.mail``) and signed
webhooks (``notifications.webhooks``) are the two shipped; each registers itself when
``notifications.apps`` loads it. A new channel is one module that registers a
``Channel``; planning decides who is told what through which (``notifications.planning``),
sending looks the channel up (``notifications.sending``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import Delivery


def _always(_delivery: Delivery) -> str | None:
    return None


@dataclass(frozen=True)
class Channel:
    name: str  # Delivery.channel
    action_type: str  # the beside action's type in the ledger (and in the API's actions)
    # The receiver de-duplicates on the key: a lost answer is sent again with the same key;
    # otherwise (SMTP) it is ``unknown`` and never sent again on its own.
    honors_key: bool
    send: Callable[[dict[str, Any], str], dict[str, Any]]  # (args, key) → receipt; raises StepFailure
    # Why this delivery should no longer go (None: it should), asked before each attempt.
    still_wanted: Callable[[Delivery], str | None] = _always


_channels: dict[str, Channel] = {}


def register(channel: Channel) -> Channel:
    if channel.name in _channels:
        raise ValueError(f"notification channel {channel.name!r} registered twice")
    _channels[channel.name] = channel
    return channel


def get(name: str) -> Channel:
    try:
        return _channels[name]
    except KeyError:
        raise LookupError(f"no notification channel {name!r} is registered") from None


def registered() -> list[Channel]:
    return list(_channels.values())
