from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from config.api import api
from config.login import AdminLoginForm, LoginView, admin_login
from metrics.views import scrape

admin.site.login_form = AdminLoginForm

urlpatterns = [
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("oidc/", include("accounts.sso.urls")),  # single sign-on (404 while OIDC_ISSUER is unset)
    path("admin/login/", admin_login, name="admin_login"),  # before the admin: password sign-in off
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("metrics", scrape, name="prometheus"),  # Prometheus scrapes it (not under /api/)
    path("dashboard/metrics/", include("metrics.urls")),
    path("dashboard/workers/", include("console.workers_urls")),
    path("artifacts/", include("artifacts.urls")),
    path("approvals/", include("approvals.urls")),
    path("account/", include("notifications.urls")),
    path("", include("console.urls")),
]

# Styled error pages with navigation (JSON under /api/).
handler400 = "config.error_views.bad_request"
handler403 = "config.error_views.permission_denied"
handler404 = "config.error_views.page_not_found"
handler500 = "config.error_views.server_error"
