"""Console page routes: every filter is a query parameter, so every view is a deep link."""

from django.urls import path

from opsconsole.console.views import audit, detail, overview, queue, resources, trace

app_name = "console"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("resources/", resources.resource_list, name="resources"),
    path("resources/reconcile", resources.resource_reconcile_selected, name="resources-reconcile"),
    path("resources/<int:pk>/", detail.resource_detail, name="resource"),
    path("resources/<int:pk>/reconcile", detail.resource_reconcile_now, name="resource-reconcile"),
    path("traces/<str:trace_id>/", trace.trace_detail, name="trace"),
    path("audit/", audit.audit_log, name="audit"),
    path("audit/verify", audit.audit_verify, name="audit-verify"),
    path("queue/", queue.queue_view, name="queue"),
    path("queue/retry-now", queue.queue_retry_now, name="queue-retry-now"),
    path("queue/reset-backoff", queue.queue_reset_backoff, name="queue-reset-backoff"),
]
