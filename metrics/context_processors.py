from django.utils.functional import SimpleLazyObject

from .access import may_read


def nav(request) -> dict:
    """``shows_metrics``: whether the nav links the metrics page (read only when shown)."""
    return {"shows_metrics": SimpleLazyObject(lambda: may_read(getattr(request, "user", None)))}
