"""Django admin for approvals: read-only. A request's status changes only through its
transitions (``approvals.services.close_request``, audited); decisions and audit
entries are append-only in the database."""

from __future__ import annotations

from django.contrib import admin

from executions.admin import ReadOnlyAdmin

from .models import ApprovalRequest, AuditEntry, Decision


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdmin):
    list_display = ("id", "execution", "action", "version", "status", "requested_by", "created_at", "expires_at")
    list_filter = ("status", "action")
    list_select_related = ("execution", "requested_by")
    search_fields = ("=id", "=execution__id", "content_sha256")


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = ("id", "request", "decision", "decided_by", "artifact_version", "created_at")
    list_filter = ("decision",)
    list_select_related = ("request", "decided_by")
    search_fields = ("=request__id", "event_id")


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "request", "execution", "actor_label", "artifact_version", "created_at")
    list_filter = ("kind",)
    list_select_related = ("request", "execution")
    search_fields = ("=request__id", "=execution__id", "actor_label")
    show_full_result_count = False
