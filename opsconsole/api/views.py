"""Health probes. /healthz answers while the process is up; it touches nothing else. /readyz answers 200
only when the database, Redis and the Kubernetes API answer (503 otherwise), with each check's outcome; no
leading controller makes it `"degraded": true`, not unready (reconcilers.services.readiness says why)."""

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from reconcilers.services.readiness import readiness_check


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the web process is up and serving requests."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: database, Redis, Kubernetes API reachable; degraded without a leading controller."""
    result = readiness_check()
    return JsonResponse(result, status=200 if result["ready"] else 503)
