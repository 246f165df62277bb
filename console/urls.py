from django.urls import path

from . import decide, operate, views

app_name = "executions"

urlpatterns = [
    path("", views.execution_list, name="list"),
    path("live/", views.nav_live, name="live_nav"),
    path("live/executions/", views.list_live, name="live_list"),
    path("executions/start/", views.execution_start, name="start"),
    path("executions/<str:ref>/", views.execution_detail, name="detail"),
    path("executions/<str:ref>/live/", views.execution_live, name="live"),
    path("executions/<str:ref>/cancel/", views.execution_cancel, name="cancel"),
    path("executions/<str:ref>/resume/", views.execution_resume, name="resume"),
    path("executions/<str:ref>/resolve/", views.action_resolve, name="resolve"),
    path("executions/<str:ref>/signal/", views.execution_signal, name="signal"),
    path("executions/<str:ref>/redraft/", views.execution_redraft, name="redraft"),
    path("executions/<str:ref>/approvals/<int:approval_id>/decide/", decide.decide, name="decide"),
    # Operators (the triage console): the resume preview, restart from a step, closing compensations.
    path("executions/<str:ref>/resume/preview/", operate.resume_preview, name="resume_preview"),
    path("executions/<str:ref>/restart/", operate.execution_restart, name="restart"),
    path("executions/<str:ref>/compensations/close/", operate.compensation_close, name="close_compensation"),
]
