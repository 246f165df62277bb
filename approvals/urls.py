from django.urls import path
from django.views.generic import RedirectView

from . import audit_views, inbox_views

app_name = "approvals"

urlpatterns = [
    # /approvals/ itself: the inbox (where a person typing the address means to go).
    path("", RedirectView.as_view(pattern_name="approvals:inbox"), name="index"),
    path("inbox/", inbox_views.inbox, name="inbox"),
    path("inbox/count/", inbox_views.inbox_count, name="inbox_count"),
    path("audit/", audit_views.audit_list, name="audit"),
    path("audit/export.csv", audit_views.audit_export, name="audit_export"),
    path("audit/<int:pk>/", audit_views.audit_story, name="audit_story"),
    path("<int:pk>/", inbox_views.approval_detail, name="detail"),
    path("<int:pk>/state/", inbox_views.approval_state, name="state"),
    path("<int:pk>/viewed/", inbox_views.approval_viewed, name="viewed"),
]
