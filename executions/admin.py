"""Django admin for the runtime's record: for looking, not for changing.

Every change to an execution, an action or a wait goes through the runtime's services
(``lifecycle.apply``, ``ledger``, ``waits``), which fence it, check the state and
append its event in the same transaction; a form that wrote ``status`` (or a lease,
or the checkpointed context) beside them would break all three. So the admin shows
these models read-only: no add, no change, no delete. Events and step runs are
append-only (events in the database itself). (API tokens are accounts' admin.)
"""

from __future__ import annotations

from django.contrib import admin

from .models import Action, Execution, ExecutionEvent, StepRun, Wait


class ReadOnlyAdmin(admin.ModelAdmin):
    """View only: every field read-only, no add, change or delete."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Execution)
class ExecutionAdmin(ReadOnlyAdmin):
    list_display = ("ref", "workflow", "workflow_version", "status", "reason_code", "current_step", "created_by")
    list_filter = ("status", "workflow", "reason_code")
    list_select_related = ("created_by",)
    search_fields = ("=id", "workflow", "current_step")
    date_hierarchy = "created_at"
    show_full_result_count = False


@admin.register(ExecutionEvent)
class ExecutionEventAdmin(ReadOnlyAdmin):
    list_display = ("id", "execution", "type", "from_status", "to_status", "step", "actor_label", "created_at")
    list_filter = ("type",)
    list_select_related = ("execution",)
    search_fields = ("=execution__id", "type", "actor_label")
    show_full_result_count = False


@admin.register(StepRun)
class StepRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "execution", "step", "kind", "round", "attempt", "outcome", "worker", "finished_at")
    list_filter = ("outcome", "kind")
    list_select_related = ("execution",)
    search_fields = ("=execution__id", "step")
    show_full_result_count = False


@admin.register(Action)
class ActionAdmin(ReadOnlyAdmin):
    list_display = ("key", "type", "status", "attempts", "execution", "updated_at")
    list_filter = ("status", "type")
    list_select_related = ("execution",)
    search_fields = ("key",)


@admin.register(Wait)
class WaitAdmin(ReadOnlyAdmin):
    list_display = ("id", "execution", "step", "signal", "status", "opened_at", "due_at", "closed_at")
    list_filter = ("status",)
    list_select_related = ("execution",)
    search_fields = ("=execution__id", "signal", "event_id")
