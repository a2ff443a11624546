"""The maintained counts (migration 0015's triggers, `reconcilers.services.selectors.aggregates`): after inserts,
phase changes, mirror rows marked deleted (and rows deleted, on PostgreSQL) they equal a recount of the rows,
folded or not; a tampered total is found and repaired by `recount`; edge windows that start inside an hour
bucket count exactly what a scan of the trail counts."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.models import Count, Q
from django.test.utils import CaptureQueriesContext

from reconcilers.models import (
    Resource,
    ResourceCount,
    ResourceCountDelta,
    Transition,
    TransitionCount,
    TransitionCountDelta,
)
from reconcilers.services.selectors import aggregates, stats
from tests.reconcilers.audit_support import observed, record

pytestmark = pytest.mark.django_db

_seq = itertools.count(1000)


def _scan_phase_counts(namespaces: frozenset[str] | None = None) -> dict[str, dict[str, int]]:
    qs = Resource.objects.filter(deleted=False)
    if namespaces is not None:
        qs = qs.filter(namespace__in=namespaces)
    out: dict[str, dict[str, int]] = {}
    for row in qs.values("kind", "phase").annotate(n=Count("id")).order_by():
        out.setdefault(row["kind"], {})[row["phase"]] = row["n"]
    return out


def _scan_edges(since: dict[str, datetime]) -> dict[str, dict[str, dict[tuple[str, str], int]]]:
    out: dict[str, dict[str, dict[tuple[str, str], int]]] = {}
    for name, at in since.items():
        for row in (Transition.objects.filter(created_at__gte=at).values("kind", "from_phase", "to_phase")
                    .annotate(n=Count("id")).order_by()):
            out.setdefault(row["kind"], {w: {} for w in since})[name][(row["from_phase"], row["to_phase"])] = row["n"]
    return out


def _fleet() -> None:
    """Five resources in two namespaces, taken through a few phases by the recording path."""
    for i in range(5):
        obj = observed(f"uid-agg-{i}", namespace="team-a" if i % 2 else "team-b")
        record(obj, "Pending")
        if i < 4:
            record(observed(obj.uid, namespace=obj.namespace, name=obj.name), "Running")
        if i < 2:
            record(observed(obj.uid, namespace=obj.namespace, name=obj.name), "Degraded")


def _transition_at(resource: Resource, at: datetime, to_phase: str, from_phase: str = "") -> None:
    """A trail row at a chosen time (the chain is not what these tests are about)."""
    Transition.objects.create(resource=resource, resource_uid=resource.uid, kind=resource.kind,
                              namespace=resource.namespace, name=resource.name, seq=next(_seq), from_phase=from_phase,
                              to_phase=to_phase, created_at=at, hash="x" * 64)


def test_the_counts_equal_a_recount_after_recording_folded_or_not():
    _fleet()
    assert ResourceCountDelta.objects.exists() and TransitionCountDelta.objects.exists()  # written, not folded yet
    assert aggregates.recount() == {"resources": {}, "transitions": {}}
    assert aggregates.phase_counts() == _scan_phase_counts() == {"Memcached": {"Pending": 1, "Running": 2,
                                                                               "Degraded": 2}}
    assert aggregates.fold()
    assert not ResourceCountDelta.objects.exists() and not TransitionCountDelta.objects.exists()
    assert aggregates.recount() == {"resources": {}, "transitions": {}}
    assert aggregates.phase_counts(namespaces=frozenset({"team-a"})) == _scan_phase_counts(frozenset({"team-a"}))
    assert aggregates.phase_counts(namespaces=frozenset()) == {}
    assert sum(TransitionCount.objects.values_list("n", flat=True)) == Transition.objects.count() == 11


def test_a_mirror_row_marked_deleted_leaves_the_live_counts():
    _fleet()
    Resource.objects.filter(uid="uid-agg-0").update(deleted=True, phase="Deleted")
    Resource.objects.filter(uid="uid-agg-1").update(resource_version="999", labels={"x": "y"})  # no key change
    assert aggregates.phase_counts() == _scan_phase_counts()
    assert aggregates.phase_counts()["Memcached"] == {"Pending": 1, "Running": 2, "Degraded": 1}
    deleted = aggregates.resource_counts(deleted=True)
    assert deleted == {("Memcached", "cache.example.com", "Deleted"): 1}
    assert aggregates.recount() == {"resources": {}, "transitions": {}}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite has no DELETE trigger on the mirror")
def test_a_deleted_mirror_row_leaves_the_counts_on_postgresql():
    obj = observed("uid-agg-gone")
    Resource.objects.create(uid=obj.uid, key="k/gone", group="cache.example.com", version="v1alpha1",
                            plural="memcacheds", kind="Memcached", namespace="default", name="gone", phase="Pending")
    assert aggregates.phase_counts() == {"Memcached": {"Pending": 1}}
    Resource.objects.filter(uid=obj.uid).delete()
    assert aggregates.phase_counts() == {}
    assert aggregates.recount() == {"resources": {}, "transitions": {}}


def test_a_tampered_total_is_found_and_repaired():
    _fleet()
    aggregates.fold()
    ResourceCount.objects.filter(phase="Running").update(n=1000)
    TransitionCount.objects.filter(to_phase="Pending").delete()
    found = aggregates.recount()
    assert found["resources"] == {
        ("default", "Memcached", "cache.example.com", "team-a", "Running", False): (1000, 1),
        ("default", "Memcached", "cache.example.com", "team-b", "Running", False): (1000, 1)}
    assert {k[3:]: v for k, v in found["transitions"].items()} == {("team-a", "", "Pending"): (0, 2),
                                                                   ("team-b", "", "Pending"): (0, 3)}
    assert aggregates.recount(repair=True) == found
    assert aggregates.recount() == {"resources": {}, "transitions": {}}
    assert aggregates.phase_counts() == _scan_phase_counts()


def test_edge_windows_that_start_inside_a_bucket_count_what_a_scan_counts():
    record(observed("uid-agg-edges"), "Pending")
    resource = Resource.objects.get(uid="uid-agg-edges")
    now = datetime.now(UTC)
    for minutes in (0, 5, 59, 61, 65, 119, 121, 600, 1439, 1441, 3000):
        _transition_at(resource, now - timedelta(minutes=minutes), "Running", "Pending")
    windows = {"hour": now - timedelta(hours=1), "day": now - timedelta(days=1),
               "odd": now - timedelta(minutes=123, seconds=7)}
    expected = _scan_edges(windows)
    assert expected["Memcached"]["hour"][("Pending", "Running")] == 3
    assert aggregates.edge_window_counts(windows) == expected
    assert stats.edge_window_counts(windows) == expected
    aligned = now.replace(minute=0, second=0, microsecond=0)
    assert aggregates.edge_window_counts({"aligned": aligned}) == _scan_edges({"aligned": aligned})
    assert aggregates.edge_window_counts({"hour": windows["hour"]}, namespaces=frozenset({"elsewhere"})) == {}


def test_transitions_per_kind_over_a_range_matches_a_scan():
    record(observed("uid-agg-range"), "Pending")
    resource = Resource.objects.get(uid="uid-agg-range")
    now = datetime.now(UTC)
    for minutes in (1, 30, 90, 150, 200, 400):
        _transition_at(resource, now - timedelta(minutes=minutes), "Running", "Pending")
    for start, end in ((now - timedelta(minutes=170), now - timedelta(minutes=20)),
                       (now - timedelta(minutes=10), now), (now - timedelta(days=2), now + timedelta(minutes=1))):
        scanned = Transition.objects.filter(Q(created_at__gte=start) & Q(created_at__lt=end)).count()
        assert aggregates.transitions_per_kind(start, end) == ({"Memcached": scanned} if scanned else {})


def _other_cluster_fleet() -> Resource:
    """Two resources of cluster `prod` (one Pending, one Running after a transition) beside `_fleet`'s."""
    for name, phase in (("p1", "Pending"), ("p2", "Pending")):
        Resource.objects.create(uid=f"uid-prod-{name}", key=f"prod/cache.example.com/v1alpha1/memcacheds/team-a/{name}",
                                cluster="prod", group="cache.example.com", version="v1alpha1", plural="memcacheds",
                                kind="Memcached", namespace="team-a", name=name, phase=phase)
    moved = Resource.objects.get(uid="uid-prod-p2")
    Transition.objects.create(resource=moved, resource_uid=moved.uid, kind=moved.kind, namespace=moved.namespace,
                              name=moved.name, seq=1, from_phase="Pending", to_phase="Running",
                              created_at=datetime.now(UTC), hash="y" * 64, cluster="prod")
    Resource.objects.filter(pk=moved.pk).update(phase="Running")
    return moved


def test_the_counts_carry_the_cluster():
    _fleet()
    _other_cluster_fleet()
    assert aggregates.recount() == {"resources": {}, "transitions": {}}
    assert aggregates.phase_counts(clusters=frozenset({"prod"})) == {"Memcached": {"Pending": 1, "Running": 1}}
    assert aggregates.phase_counts(clusters=frozenset({"default"})) == _scan_phase_counts() | {
        "Memcached": {"Pending": 1, "Running": 2, "Degraded": 2}}
    assert aggregates.phase_counts(clusters=frozenset()) == {}
    assert aggregates.phase_counts()["Memcached"] == {"Pending": 2, "Running": 3, "Degraded": 2}
    assert aggregates.cluster_phase_counts() == {"default": {"Pending": 1, "Running": 2, "Degraded": 2},
                                                 "prod": {"Pending": 1, "Running": 1}}
    assert aggregates.cluster_phase_counts(namespaces=frozenset({"team-b"})) == {
        "default": {"Pending": 1, "Running": 1, "Degraded": 1}}
    hour = {"hour": datetime.now(UTC) - timedelta(hours=1)}
    assert aggregates.edge_window_counts(hour, clusters=frozenset({"prod"})) == {
        "Memcached": {"hour": {("Pending", "Running"): 1}}}
    Resource.objects.filter(uid="uid-prod-p1").update(cluster="staging")  # a moved row moves its count
    assert aggregates.cluster_phase_counts(clusters=frozenset({"staging", "prod"})) == {
        "staging": {"Pending": 1}, "prod": {"Running": 1}}
    assert aggregates.recount() == {"resources": {}, "transitions": {}}


def test_a_fold_with_nothing_to_fold_only_reads():
    _fleet()
    assert aggregates.fold()
    with CaptureQueriesContext(connection) as queries:
        assert aggregates.fold()
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["SELECT"]
