"""REST API routes, versioned under /api/v1/, with the OpenAPI schema and Swagger UI (local assets)."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from opsconsole.api import actions, reads, tokens

router = SimpleRouter(trailing_slash=False)
router.register("kinds", reads.KindViewSet, basename="kind")
router.register("resources", reads.ResourceViewSet, basename="resource")
router.register("transitions", reads.TransitionViewSet, basename="transition")
router.register("reconcile-requests", reads.ReconcileRequestViewSet, basename="reconcile-request")

urlpatterns = [
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("resources/reconcile", actions.BulkReconcileView.as_view(), name="resource-reconcile-bulk"),
    path("resources/<str:pk>/reconcile", actions.ResourceReconcileView.as_view(), name="resource-reconcile"),
    path("transitions.csv", reads.TransitionCsvExportView.as_view(), name="transition-export-csv"),
    path("transitions.jsonl", reads.TransitionJsonlExportView.as_view(), name="transition-export-jsonl"),
    path("queue", reads.QueueView.as_view(), name="queue"),
    path("queue/retry-now", actions.QueueRetryNowView.as_view(), name="queue-retry-now"),
    path("queue/reset-backoff", actions.QueueResetBackoffView.as_view(), name="queue-reset-backoff"),
    path("metrics/summary", reads.MetricsSummaryView.as_view(), name="metrics-summary"),
    path("me", tokens.MeView.as_view(), name="me"),
    path("tokens", tokens.TokenListCreateView.as_view(), name="tokens"),
    path("tokens/<str:pk>", tokens.TokenRevokeView.as_view(), name="token-revoke"),
    path("actions", tokens.ActionRecordListView.as_view(), name="actions"),
    path("", include(router.urls)),
]
