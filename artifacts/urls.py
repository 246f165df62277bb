from django.urls import path

from . import views

app_name = "artifacts"

urlpatterns = [
    path("<str:artifact_ref>/", views.artifact_latest, name="latest"),
    path("<str:artifact_ref>/v<int:number>/", views.version_detail, name="version"),
    path("<str:artifact_ref>/v<int:number>/raw", views.version_raw, name="raw"),
]
