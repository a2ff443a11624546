"""The URL map: the console at /, the REST API under /api/v1/, health probes, /metrics, and Django's admin.
Unmatched /api/ paths and crashes there answer JSON (opsconsole.api.exceptions), not Django's HTML pages."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from opsconsole.api import views as api_views
from opsconsole.console.security import csp
from opsconsole.telemetry import views as telemetry_views

urlpatterns = [
    path("healthz", api_views.healthz, name="healthz"),
    path("readyz", api_views.readyz, name="readyz"),
    path("metrics", telemetry_views.metrics, name="metrics"),
    path("login/", csp(auth_views.LoginView.as_view()), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("opsconsole.api.urls")),
    path("", include("opsconsole.console.urls")),
]

handler404 = "opsconsole.api.exceptions.api_not_found"
handler500 = "opsconsole.api.exceptions.api_server_error"
