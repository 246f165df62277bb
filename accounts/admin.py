"""Django admin for API tokens: deleting one revokes it, as ``manage.py revoke_api_token``
does; a token is never added or edited here (it is shown once, by ``manage.py
create_api_token``), and its digest is never shown.

A single sign-on user's page says whom the provider signed in ("signed in through <issuer>
as <subject>"), and the identities are listed, searchable by subject. Only single sign-on
writes them (``accounts.identities``); deleting one unlinks the user (the next sign-in
of that subject makes a new user).
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import admin as auth_admin
from django.contrib.auth import get_user_model

from .models import ApiToken, Identity


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


class _WrittenBySignIn:
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Identity)
class IdentityAdmin(_WrittenBySignIn, admin.ModelAdmin):
    list_display = ("subject", "issuer", "user", "created_at", "signed_in_at")
    list_select_related = ("user",)
    search_fields = ("=subject", "user__username", "user__email")


class IdentityInline(_WrittenBySignIn, admin.StackedInline):
    model = Identity
    can_delete = False
    fields = ("issuer", "subject", "created_at", "signed_in_at")
    readonly_fields = fields
    verbose_name = verbose_name_plural = "single sign-on"


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)


@admin.register(User)
class UserAdmin(auth_admin.UserAdmin):
    inlines = [*auth_admin.UserAdmin.inlines, IdentityInline]
