"""`opsconsole_resources{kind,phase}` and `opsconsole_resources_oldest_in_phase_seconds{kind,phase}`: gauges that
are not stored but counted from the Resource table when scraped (the web's `/metrics` registers the collector).

It reads the database, so it lives apart from `reconcilers.engine.metrics`, which the Django-free parts of the
engine (the reconcile step, the Kubernetes client helpers) import.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from reconcilers.engine import registry
from reconcilers.engine.metrics import NO_PHASE
from reconcilers.models import Resource


class ResourcesCollector(Collector):
    """`opsconsole_resources{kind,phase}`: the Resource table counted at scrape time (deleted ones excluded),
    with every declared state of every registered kind present, at 0 when no resource is in it; and
    `opsconsole_resources_oldest_in_phase_seconds{kind,phase}` (the "stuck in Pending" alert's signal)."""

    def describe(self) -> list[GaugeMetricFamily]:
        """Declared without samples (so registering it costs no query)."""
        return [
            GaugeMetricFamily("opsconsole_resources", "Resources known to opsconsole, by kind and phase",
                              labels=["kind", "phase"]),
            GaugeMetricFamily("opsconsole_resources_oldest_in_phase_seconds",
                              "How long the resource longest in each phase has been in it (0 when none)",
                              labels=["kind", "phase"]),
        ]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """One sample per (kind, phase): the registered kinds' states at 0, then the counted rows."""
        counts: dict[tuple[str, str], int] = {}
        oldest: dict[tuple[str, str], float] = {}
        for rec in registry.registered():
            for state in rec.state_machine.states:
                counts[(rec.resource.kind, state)] = 0
                oldest[(rec.resource.kind, state)] = 0.0
        now = timezone.now()
        rows = (Resource.objects.filter(deleted=False).values("kind", "phase")
                .annotate(n=Count("id"), since=Min("phase_since")).order_by())
        for row in rows:
            pair = (row["kind"], row["phase"] or NO_PHASE)
            counts[pair] = row["n"]
            oldest[pair] = max(0.0, (now - row["since"]).total_seconds()) if row["since"] else 0.0
        family = GaugeMetricFamily("opsconsole_resources", "Resources known to opsconsole, by kind and phase",
                                   labels=["kind", "phase"])
        for (kind, phase), n in sorted(counts.items()):
            family.add_metric([kind, phase], n)
        yield family
        age = GaugeMetricFamily("opsconsole_resources_oldest_in_phase_seconds",
                                "How long the resource longest in each phase has been in it (0 when none)",
                                labels=["kind", "phase"])
        for (kind, phase), seconds in sorted(oldest.items()):
            age.add_metric([kind, phase], seconds)
        yield age
