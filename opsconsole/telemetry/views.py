"""`/metrics` of the web process: its own registry (API calls it made, spans dropped, ...) plus
`opsconsole_resources{kind,phase}` counted from the Resource table at scrape time, every declared state of
every registered kind present (0 when empty). The text format `promtool check metrics` accepts."""

from __future__ import annotations

from collections.abc import Iterator

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric

from opsconsole.telemetry.metrics import reconciler_metrics_init
from reconcilers.engine.resources_gauge import ResourcesCollector

_initialised = False


class _Both:
    """The process registry and the scrape-time resources collector, as one thing to expose."""

    def __init__(self, *registries: CollectorRegistry | ResourcesCollector) -> None:
        self._parts = registries

    def collect(self) -> Iterator[Metric]:
        for part in self._parts:
            yield from part.collect()


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus exposition of this web process."""
    global _initialised
    if not _initialised:  # label pairs at 0 once per process (the registry is process-wide)
        reconciler_metrics_init()
        _initialised = True
    body = generate_latest(_Both(REGISTRY, ResourcesCollector()))  # type: ignore[arg-type]
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
