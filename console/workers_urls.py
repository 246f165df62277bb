"""``/dashboard/workers/``: the Workers page and its poll (named ``fleet:…``)."""

from django.urls import path

from . import workers_views

app_name = "fleet"

urlpatterns = [
    path("", workers_views.workers_page, name="workers"),
    path("live/", workers_views.workers_live, name="live"),
]
