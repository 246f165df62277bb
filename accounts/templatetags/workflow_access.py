"""``{% load workflow_access %}{% with parent=execution.parent|readable %}``: a row reached
through a join (which the scoped managers don't see) shown only if the person looking may
read its workflow (access by workflow); else None, as if there were none."""

from django import template

from access import viewer

register = template.Library()


@register.filter
def readable(row):
    if row is None or getattr(row, "workflow", None) in viewer.hidden_now():
        return None
    return row
