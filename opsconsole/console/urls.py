"""Console page routes."""

from django.urls import path

from opsconsole.console import views

app_name = "console"

urlpatterns = [
    path("", views.overview, name="overview"),
]
