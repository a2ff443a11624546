"""Console page routes: every filter is a query parameter, so every view is a deep link. Ids in paths are at
most 18 digits (a bigger number is no row, and SQLite cannot even compare one: it would be a 500)."""

from django.urls import path, register_converter

from opsconsole.console.views import (
    audit,
    detail,
    escalation,
    healing,
    objects,
    overview,
    queue,
    resources,
    tokens,
    trace,
    verbosity,
    whatif,
    why,
    workers,
)

app_name = "console"


class IdConverter:
    """A row id: 1 to 18 digits, so always within a 64-bit integer column."""

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(IdConverter, "rowid")

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("resources/", resources.resource_list, name="resources"),
    path("resources/reconcile", resources.resource_reconcile_selected, name="resources-reconcile"),
    path("resources/<rowid:pk>/", detail.resource_detail, name="resource"),
    path("resources/<rowid:pk>/reconcile", detail.resource_reconcile_now, name="resource-reconcile"),
    path("resources/<rowid:pk>/whatif", whatif.resource_whatif_preview, name="resource-whatif"),
    path("resources/<rowid:pk>/verbosity", verbosity.resource_verbosity, name="resource-verbosity"),
    path("runs/<rowid:pk>/log/", verbosity.run_log, name="run-log"),
    path("verbosity/", verbosity.verbosity_page, name="verbosity"),
    path("verbosity/set", verbosity.scoped_verbosity, name="verbosity-set"),
    path("resources/<rowid:pk>/rollback", healing.resource_rollback, name="resource-rollback"),
    path("resources/<rowid:pk>/suspend", healing.resource_suspend, name="resource-suspend"),
    path("resources/<rowid:pk>/resume", healing.resource_resume, name="resource-resume"),
    path("resources/<rowid:pk>/pin", healing.resource_pin, name="resource-pin"),
    path("resources/<rowid:pk>/unpin", healing.resource_unpin, name="resource-unpin"),
    path("resources/<rowid:pk>/anomalies/<str:rule>/acknowledge", escalation.anomaly_acknowledge,
         name="anomaly-acknowledge"),
    path("resources/<rowid:pk>/anomalies/<str:rule>/assign", escalation.anomaly_assign, name="anomaly-assign"),
    path("resources/<rowid:pk>/anomalies/<str:rule>/resolve", escalation.anomaly_resolve, name="anomaly-resolve"),
    path("objects/<str:group>/<str:version>/<str:plural>/<str:namespace>/<str:name>/", objects.object_detail,
         name="object"),
    path("objects/<str:group>/<str:version>/<str:plural>/<str:name>/", objects.object_detail, name="object-cluster"),
    path("traces/<str:trace_id>/", trace.trace_detail, name="trace"),
    path("runs/<rowid:pk>/", why.run_detail, name="run"),
    path("slo/", why.slo_page, name="slo"),
    path("audit/", audit.audit_log, name="audit"),
    path("audit/verify", audit.audit_verify, name="audit-verify"),
    path("queue/", queue.queue_view, name="queue"),
    path("queue/retry-now", queue.queue_retry_now, name="queue-retry-now"),
    path("queue/reset-backoff", queue.queue_reset_backoff, name="queue-reset-backoff"),
    path("workers/", workers.workers_view, name="workers"),
    path("tokens/", tokens.token_page, name="tokens"),
    path("tokens/create", tokens.token_create_view, name="tokens-create"),
    path("tokens/<rowid:pk>/revoke", tokens.token_revoke_view, name="tokens-revoke"),
]
