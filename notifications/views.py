"""The account page: who you are and whether keel e-mails you."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from executions.errors import InvalidInput

from .services import notification_settings, notification_settings_update


@login_required
@require_http_methods(["GET", "POST"])
def account(request: HttpRequest) -> HttpResponse:
    error = ""
    if request.method == "POST":
        try:
            notification_settings_update(
                user=request.user,
                email_notifications=request.POST.get("email_notifications") == "on",
                email=request.POST.get("email", request.user.email),
            )
        except InvalidInput as exc:
            error = exc.reason
        else:
            messages.success(request, "Saved.")
            return redirect("notifications:account")
    context = {"settings": notification_settings(user=request.user), "error": error}
    return render(request, "notifications/account.html", context, status=422 if error else 200)
