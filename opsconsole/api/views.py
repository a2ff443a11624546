"""Health probes. /healthz answers while the process is up; it touches nothing else."""

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the web process is up and serving requests."""
    return JsonResponse({"status": "ok"})
