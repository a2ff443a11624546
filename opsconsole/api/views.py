"""Health probes. /healthz answers while the process is up; it touches nothing else. /readyz answers 200
only when the database, Redis and the Kubernetes API answer and a controller leads (503 otherwise, with
each check's outcome)."""

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from reconcilers.services.readiness import readiness_check


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the web process is up and serving requests."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: database, Redis, Kubernetes API reachable and a controller leading."""
    result = readiness_check()
    return JsonResponse(result, status=200 if result["ready"] else 503)
