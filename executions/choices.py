"""Django's ``TextChoices`` as the type checker should read it (no django-stubs here).

Django makes a member written ``RUNNING = "running", "Running"`` a ``str`` labelled
"Running"; mypy, to which Django is ``Any``, would read the tuple. Under
``TYPE_CHECKING`` the vocabularies with labels (``Status``, ``StuckReason``) derive
from a ``StrEnum`` with Django's class properties; at run time from Django's own class.
A leaf: it imports nothing of the project.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import enum

    class _ChoicesType(enum.EnumMeta):
        @property
        def choices(cls) -> list[tuple[str, str]]: ...
        @property
        def values(cls) -> list[str]: ...
        @property
        def labels(cls) -> list[str]: ...

    class TextChoices(enum.StrEnum, metaclass=_ChoicesType):
        @property
        def label(self) -> str: ...

else:
    from django.db.models import TextChoices

__all__ = ["TextChoices"]
