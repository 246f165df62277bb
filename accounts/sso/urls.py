"""``/oidc/``: the names are mozilla-django-oidc's (its views reverse them)."""

from django.urls import path

from accounts.sso.views import CallbackView, SignInView

urlpatterns = [
    path("authenticate/", SignInView.as_view(), name="oidc_authentication_init"),
    path("callback/", CallbackView.as_view(), name="oidc_authentication_callback"),
]
