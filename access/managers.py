"""``scoped(path)``: the default manager of every model that holds or belongs to an execution.

While a person looks (``access.viewer``), its querysets leave out the workflows that
person may not read, through ``path`` (``workflow`` on a row that names its workflow,
``execution__workflow`` on one that belongs to an execution). Related managers
(``execution.events``), ``get`` by id and counts all start here, so a restricted
execution is a 404 and absent from lists without the read asking. No one looking, or no
rules: the queryset is untouched, not even a condition added.
"""

from __future__ import annotations

from django.db import models

from .viewer import hidden_now


class Scoped(models.Manager):
    """A manager whose rows belong to a workflow through ``path``. Made by ``scoped(path)``:
    the path is the class's, since Django builds the related managers (``execution.events``)
    from the class without arguments."""

    path = "workflow"

    def get_queryset(self) -> models.QuerySet:
        queryset = super().get_queryset()
        hidden = hidden_now()
        if not hidden:
            return queryset
        # A related manager whose rows take their workflow from its owner (``execution.events``,
        # ``schedule.firings``; not ``parent.children``, each of its own workflow): the owner
        # answers for them without a join per instance (a page's prefetch asks one per execution).
        field = getattr(self, "field", None)
        owner = getattr(self, "instance", None)
        workflow = getattr(owner, "workflow", None)
        if field is not None and self.path.startswith(f"{field.name}__") and isinstance(workflow, str):
            return queryset.none() if workflow in hidden else queryset
        return queryset.exclude(**{f"{self.path}__in": sorted(hidden)})


def scoped(path: str = "workflow") -> Scoped:
    """``objects`` of a model whose rows belong to a workflow through ``path``."""
    return type("Scoped", (Scoped,), {"path": path, "__module__": __name__})()
