"""The controller's workqueue gauges, from the queue's per-kind depths: one series per controller, 0 when idle."""

from __future__ import annotations

from prometheus_client import REGISTRY

from reconcilers.engine.controller.loop import queue_metrics_update
from reconcilers.engine.workqueue import KindDepth

NAMES = {("cache.example.com", "memcacheds"): "memcached", ("tenancy.example.com", "tenants"): "tenant"}


def gauge(name: str, controller: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"controller": controller, "name": controller})


def test_each_controller_reports_its_kinds_depth_and_an_idle_one_zero() -> None:
    queue_metrics_update({
        "cache.example.com/v1alpha1/memcacheds": KindDepth(4, 2.5, 2.0),
        "cache.example.com/v1beta1/memcacheds": KindDepth(1, 0.5, 0.5),  # another version of the same kind
        "other.example.com/v1/things": KindDepth(9, 9.0, 9.0),  # not ours
    }, NAMES)
    assert gauge("workqueue_depth", "memcached") == 5
    assert gauge("workqueue_unfinished_work_seconds", "memcached") == 3.0
    assert gauge("workqueue_longest_running_processor_seconds", "memcached") == 2.0
    assert gauge("workqueue_depth", "tenant") == 0 and gauge("workqueue_unfinished_work_seconds", "tenant") == 0
