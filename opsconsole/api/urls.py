"""REST API routes, versioned under /api/v1/, with the OpenAPI schema, Swagger UI and ReDoc (local assets).
Every resource endpoint answers by database id (`resources/{id}`), by Kubernetes key (`kinds/…`, the default
cluster; `clusters/{cluster}/kinds/…`, any registered cluster) and by uid (`resources/by-uid/{uid}`): see
`opsconsole.api.by_key`. The registered clusters and their health: `clusters`, `clusters/{cluster}`."""

from django.urls import URLPattern, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from opsconsole.api import (
    actions,
    anomalies,
    by_key,
    clusters,
    explain,
    healing,
    reads,
    revisions,
    tokens,
    tree,
    verbosity,
    versions,
    whatif,
)
from opsconsole.api.pagination import NewestFirstPagination

router = SimpleRouter(trailing_slash=False)
router.register("kinds", reads.KindViewSet, basename="kind")
router.register("resources", reads.ResourceViewSet, basename="resource")
router.register("transitions", reads.TransitionViewSet, basename="transition")
router.register("reconcile-requests", reads.ReconcileRequestViewSet, basename="reconcile-request")

ADDRESSES = {
    "namespaced": "kinds/<str:group>/<str:kind>/namespaces/<str:namespace>/<str:name>",
    "cluster": "kinds/<str:group>/<str:kind>/<str:name>",
    "uid": "resources/by-uid/<str:uid>",
    "in_cluster_namespaced": ("clusters/<str:cluster>/kinds/<str:group>/<str:kind>/namespaces/<str:namespace>/"
                              "<str:name>"),
    "in_cluster_scoped": "clusters/<str:cluster>/kinds/<str:group>/<str:kind>/<str:name>",
}


def _addressed(form: str, prefix: str) -> list[URLPattern]:
    """The resource endpoints under one addressing form (the same sub-paths as `resources/{id}`)."""
    viewset, reconcile, revisions_view = by_key.VIEWS[form]

    def view(action: str, **initkwargs: object) -> object:
        return viewset.as_view({"get": action}, detail=True, basename=f"resource-{form}", **initkwargs)

    return [
        path(prefix, view("retrieve"), name=f"resource-{form}"),
        path(f"{prefix}/transitions", view("transitions", pagination_class=NewestFirstPagination),
             name=f"resource-{form}-transitions"),
        path(f"{prefix}/reconciles", view("reconciles", pagination_class=NewestFirstPagination),
             name=f"resource-{form}-reconciles"),
        path(f"{prefix}/events", view("events", pagination_class=None), name=f"resource-{form}-events"),
        path(f"{prefix}/revisions", revisions_view.as_view(), name=f"resource-{form}-revisions"),
        path(f"{prefix}/reconcile", reconcile.as_view(), name=f"resource-{form}-reconcile"),
        path(f"{prefix}/whatif", whatif.BY_ADDRESS[form].as_view(), name=f"resource-{form}-whatif"),
        path(f"{prefix}/explain", explain.BY_ADDRESS[form].as_view(), name=f"resource-{form}-explain"),
        *(path(f"{prefix}/{sub}", view.as_view(), name=f"resource-{form}-{sub}")
          for sub, view in healing.BY_ADDRESS[form].items()),
        *(path(f"{prefix}/{sub}", view.as_view(), name=f"resource-{form}-anomaly-{view.step}")
          for sub, view in anomalies.BY_ADDRESS[form].items()),
    ]


urlpatterns = [
    *(p for form, prefix in ADDRESSES.items() for p in _addressed(form, prefix)),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("redoc", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
    path("resources/reconcile", actions.BulkReconcileView.as_view(), name="resource-reconcile-bulk"),
    path("resources/<str:pk>/reconcile", actions.ResourceReconcileView.as_view(), name="resource-reconcile"),
    path("resources/<str:pk>/whatif", whatif.ResourceWhatIfView.as_view(), name="resource-whatif"),
    path("resources/<str:pk>/verbosity", verbosity.ResourceVerbosityView.as_view(), name="resource-verbosity"),
    path("verbosity", verbosity.VerbosityView.as_view(), name="verbosity"),
    path("runs/<str:pk>/log", verbosity.RunLogView.as_view(), name="run-log"),
    path("resources/<str:pk>/explain", explain.ResourceExplainView.as_view(), name="resource-explain"),
    path("resources/<str:pk>/revisions", revisions.ResourceRevisionsView.as_view(), name="resource-revisions"),
    path("resources/<str:pk>/healing", healing.ResourceHealingView.as_view(), name="resource-healing"),
    path("resources/<str:pk>/tree", tree.ResourceTreeView.as_view(), name="resource-tree"),
    *(path(f"resources/<str:pk>/{sub}", view.as_view(), name=f"resource-{sub}")
      for sub, view in healing.ACTIONS.items()),
    *(path(f"resources/<str:pk>/{sub}", view.as_view(), name=f"resource-anomaly-{view.step}")
      for sub, view in anomalies.BY_ID.items()),
    path("healing", healing.HealingOverviewView.as_view(), name="healing"),
    path("transitions.csv", reads.TransitionCsvExportView.as_view(), name="transition-export-csv"),
    path("transitions.jsonl", reads.TransitionJsonlExportView.as_view(), name="transition-export-jsonl"),
    path("queue", reads.QueueView.as_view(), name="queue"),
    path("queue/retry-now", actions.QueueRetryNowView.as_view(), name="queue-retry-now"),
    path("queue/reset-backoff", actions.QueueResetBackoffView.as_view(), name="queue-reset-backoff"),
    path("metrics/summary", reads.MetricsSummaryView.as_view(), name="metrics-summary"),
    path("runs/versions", versions.RunVersionsView.as_view(), name="run-versions"),
    path("runs/<str:pk>", explain.RunDetailView.as_view(), name="run-detail"),
    path("slo", explain.SloView.as_view(), name="slo"),
    path("clusters", clusters.ClusterListView.as_view(), name="clusters"),
    path("clusters/<str:cluster>", clusters.ClusterDetailView.as_view(), name="cluster-detail"),
    path("me", tokens.MeView.as_view(), name="me"),
    path("tokens", tokens.TokenListCreateView.as_view(), name="tokens"),
    path("tokens/<str:pk>", tokens.TokenRevokeView.as_view(), name="token-revoke"),
    path("actions", tokens.ActionRecordListView.as_view(), name="actions"),
    path("", include(router.urls)),
]
