"""Django admin for API tokens: deleting one revokes it, as ``manage.py revoke_api_token``
does; a token is never added or edited here (it is shown once, by ``manage.py
create_api_token``), and its digest is never shown."""

from __future__ import annotations

from django.contrib import admin

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "created_at", "expires_at", "last_used_at")
    list_select_related = ("user",)
    search_fields = ("prefix", "user__username")
    exclude = ("digest",)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return request.user.has_perm("accounts.delete_apitoken")
