from django.urls import path
from django.views.generic import RedirectView

from . import bulk_views, decide, operate, operations_views, operator_audit_views, start_views, views

app_name = "console"

urlpatterns = [
    path("", views.execution_list, name="list"),
    path("live/", views.nav_live, name="live_nav"),
    path("live/executions/", views.list_live, name="live_list"),
    # The breadcrumb reads "Executions / RUN_0042": its parent address leads to the list.
    path("executions/", RedirectView.as_view(pattern_name="console:list", query_string=True), name="list_alias"),
    path("executions/start/", views.execution_start, name="start"),
    path("executions/start/<str:workflow>/", start_views.start_form, name="start_form"),
    path("executions/<str:ref>/", views.execution_detail, name="detail"),
    path("executions/<str:ref>/live/", views.execution_live, name="live"),
    path("executions/<str:ref>/cancel/", views.execution_cancel, name="cancel"),
    path("executions/<str:ref>/resume/", views.execution_resume, name="resume"),
    path("executions/<str:ref>/retry/", views.execution_retry, name="retry"),
    path("executions/<str:ref>/pause/", views.execution_pause, name="pause"),
    path("executions/<str:ref>/resolve/", views.action_resolve, name="resolve"),
    path("executions/<str:ref>/signal/", views.execution_signal, name="signal"),
    path("executions/<str:ref>/answer/", views.execution_answer, name="answer"),
    path("executions/<str:ref>/chat/", views.execution_chat, name="chat"),
    path("executions/<str:ref>/redraft/", views.execution_redraft, name="redraft"),
    path("executions/<str:ref>/approvals/<int:approval_id>/decide/", decide.decide, name="decide"),
    # Operators (the triage console): the resume preview, restart from a step, closing compensations.
    path("executions/<str:ref>/resume/preview/", operate.resume_preview, name="resume_preview"),
    path("executions/<str:ref>/migrate/", operate.execution_migrate, name="migrate"),
    path("executions/<str:ref>/restart/", operate.execution_restart, name="restart"),
    path("executions/<str:ref>/accept-request/", operate.accept_request, name="accept_request"),
    path("executions/<str:ref>/compensations/close/", operate.compensation_close, name="close_compensation"),
    path("executions/<str:ref>/budget/", operate.execution_budget, name="budget"),
    path("executions/<str:ref>/hold/", operate.execution_hold, name="hold"),
    path("executions/<str:ref>/remind/", operate.approval_remind, name="remind"),
]

# Bulk operations and the operator audit (issue 12): their own block, at the root of the
# console so no ``executions/<ref>/`` pattern takes their paths.
urlpatterns += [
    path("bulk/", bulk_views.bulk_choose, name="bulk"),
    path("bulk/run/", bulk_views.bulk_run, name="bulk_run"),
    path("bulk/results/", bulk_views.bulk_results, name="bulk_results"),
    path("workflows/", start_views.workflows_page, name="workflows"),
    path("operator-audit/", operator_audit_views.operator_audit_list, name="operator_audit"),
    path("operations/", operations_views.operations, name="operations"),
    path("operations/workflows/<str:name>/", operations_views.workflow_switch, name="workflow_switch"),
    path("operations/schedules/", operations_views.schedule_add, name="schedule_add"),
    path("operations/schedules/<int:schedule_id>/delete/", operations_views.schedule_delete, name="schedule_delete"),
    path("operator-audit/export.csv", operator_audit_views.operator_audit_export, name="operator_audit_export"),
]
