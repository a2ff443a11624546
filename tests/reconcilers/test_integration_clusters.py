"""Issue 41 end to end: two kubesims, one database, two workers serving both, one controller per cluster.

The same namespace/name in both clusters is two Resource rows, each reconciled to Running through its own
cluster's client; with cluster b's controller stopped, objects deleted and created in the default cluster, then b's
controller and the default one restarted, neither's re-list and sweep touches a row of the other cluster (no ghost
deletion, no transition more); a controller started as `default` against b's API server refuses to start."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.engine import apiclient, dispatch, kube, registry
from reconcilers.engine.clusters import cluster_identity, cluster_register
from reconcilers.models import Cluster, Resource, Transition
from tests.fixtures.cluster import NAMESPACE, kubesim_with_crds, package_kubesim
from tests.fixtures.engines import INTEGRATION_RECONCILERS, Engine, engine_running, wait_idle
from tests.reconcilers.testkinds import GADGET, gadget
from tests.support.clusters import ClusterController, default_and_b, until

kubesim = package_kubesim("module")  # the default cluster: a kubesim of this module's own (no other test's objects)


def row(cluster: str, name: str) -> Resource | None:
    return Resource.objects.filter(cluster=cluster, name=name, kind="Gadget").first()


def transitions(uid: str) -> list[tuple[str, str]]:
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq").values_list("from_phase", "to_phase"))


@pytest.fixture
def two_clusters(kubesim: Any, redis_client: Any, django_db_setup: None, django_db_blocker: Any,
                 transactional_db: None, settings: Any, tmp_path: Path) -> Iterator[tuple[Engine, Any, Any, str]]:
    """The engine on the default cluster (kubesim) and cluster b (a second kubesim, context `b` in the merged
    kubeconfig), b's controller not started; the test's clients of both; a namespace in both."""
    settings.OPSCONSOLE_RECONCILERS = INTEGRATION_RECONCILERS
    registry.reset()
    try:
        with kubesim_with_crds() as sim_b, \
                default_and_b(settings, kubesim.kubeconfig, sim_b.kubeconfig, tmp_path, 0.5) as (
                    env, api_a, api_b, namespace), \
                engine_running(kubesim, django_db_blocker, prefix="test-clusters", extra_env=env) as engine:
            settings.OPSCONSOLE_WORKQUEUE_NAME = engine.queue_name
            yield engine, api_a, api_b, namespace
            wait_idle(dispatch.get_queue(), timeout=30)
            engine.stop()
    finally:
        registry.reset()


def test_two_clusters_one_database_and_a_controller_away_deletes_nothing_of_the_other(two_clusters, django_db_blocker):
    engine, api_a, api_b, ns = two_clusters
    b = ClusterController(engine.queue_name, engine.env, "b")
    with django_db_blocker.unblock():
        b.start().wait_ready()
    try:
        # the same namespace/name in both: two rows, each reconciled through its own cluster's client
        kube.create_object(api_a, GADGET, gadget(ns, "same", mode="ok"))
        kube.create_object(api_b, GADGET, gadget(ns, "same", mode="slow", sleepSeconds=0))
        kube.create_object(api_a, GADGET, gadget(ns, "gone-a", mode="ok"))
        kube.create_object(api_b, GADGET, gadget(ns, "stays-b", mode="ok"))
        until(lambda: all((r := row(c, n)) is not None and r.phase == "Running" for c, n in (
            (DEFAULT_CLUSTER, "same"), ("b", "same"), (DEFAULT_CLUSTER, "gone-a"), ("b", "stays-b"))),
            "both clusters' gadgets Running")
        same_a, same_b = row(DEFAULT_CLUSTER, "same"), row("b", "same")
        assert same_a.uid == kube.get_object(api_a, GADGET, ns, "same")["metadata"]["uid"]
        assert same_b.uid == kube.get_object(api_b, GADGET, ns, "same")["metadata"]["uid"]
        assert same_b.key == f"b/{same_a.key}" and same_a.key == GADGET.request(ns, "same").key()
        # each status was written by a run that read its own cluster's object
        assert kube.get_object(api_a, GADGET, ns, "same")["status"]["mode"] == "ok"
        assert kube.get_object(api_b, GADGET, ns, "same")["status"]["mode"] == "slow"
        until(lambda: Cluster.objects.filter(name="b", heartbeat_at__isnull=False, last_list_at__isnull=False,
                                             watch_lag_seconds__isnull=False).exclude(leader="").exists(),
              "cluster b's health reported")
        health = Cluster.objects.get(name="b")
        assert health.identity == cluster_identity(api_b) != Cluster.objects.get(name=DEFAULT_CLUSTER).identity
        assert health.context == "b" and health.unreachable_since is None
        wait_idle(dispatch.get_queue(), timeout=30)
        before_b = {n: transitions(row("b", n).uid) for n in ("same", "stays-b")}

        # b's controller away: the default cluster changes meanwhile
        b.stop()
        kube.delete_object(api_a, GADGET, ns, "gone-a")
        kube.create_object(api_a, GADGET, gadget(ns, "new-a", mode="ok"))
        until(lambda: (r := row(DEFAULT_CLUSTER, "gone-a")) is not None and r.deleted, "gone-a recorded deleted")
        until(lambda: (r := row(DEFAULT_CLUSTER, "new-a")) is not None and r.phase == "Running", "new-a Running")
        wait_idle(dispatch.get_queue(), timeout=30)
        before_a = {n: transitions(row(DEFAULT_CLUSTER, n).uid) for n in ("same", "gone-a", "new-a")}

        # b's controller back, then the default one restarted: each re-lists and sweeps its own rows only
        restarted = timezone.now()
        with django_db_blocker.unblock():
            b.start().wait_ready()
            engine.controller.stop()
            engine.controller.start().wait_ready()
        until(lambda: Cluster.objects.filter(last_list_at__gt=restarted).count() == 2, "both re-listed")
        time.sleep(1.0)  # and swept what they listed: a sweep that touched the other cluster would show by then
        wait_idle(dispatch.get_queue(), timeout=30)
        # this test's namespace only: a row another test's engine recorded late in this database is not ours
        assert not Resource.objects.filter(name__in=["same", "stays-b"], deleted=True).exists()
        assert list(Resource.objects.filter(namespace=ns, deleted=True).values_list("cluster", "name")) == [
            (DEFAULT_CLUSTER, "gone-a")]
        assert {n: transitions(row(DEFAULT_CLUSTER, n).uid) for n in before_a} == before_a
        assert {n: transitions(row("b", n).uid) for n in before_b} == before_b
        assert before_a["gone-a"][-1] == ("Terminating", "Deleted")
    finally:
        b.stop()


def test_a_controller_pointed_at_another_cluster_under_a_registered_name_refuses_to_start(
        kubesim: Any, transactional_db: None, settings: Any, tmp_path: Path):
    settings.KUBECONFIG = kubesim.kubeconfig
    apiclient.reset()
    with kubesim_with_crds() as sim_b:
        api_a = kube.build_api_client(kubesim.kubeconfig)
        try:
            cluster_register(DEFAULT_CLUSTER, identity=cluster_identity(api_a))  # its first controller's
            api_b = kube.build_api_client(sim_b.kubeconfig)
            try:
                kube.create_object(api_b, NAMESPACE, {"metadata": {"name": "only-in-b"}})
                uid_b = kube.create_object(api_b, GADGET, gadget("only-in-b", "x", mode="ok"))["metadata"]["uid"]
            finally:
                api_b.close()
            settings.KUBECONFIG = sim_b.kubeconfig  # the default cluster's name, the other cluster's API server
            apiclient.reset()
            with pytest.raises(CommandError) as refused:
                call_command("runcontroller", "--cluster", DEFAULT_CLUSTER, "--api-timeout", "5")
            assert cluster_identity(api_a) in str(refused.value)
            assert Cluster.objects.get(name=DEFAULT_CLUSTER).identity == cluster_identity(api_a)
            # nothing of the other cluster recorded (other rows of this worker's database may come and go: an
            # engine of another module can still be running against the session's kubesim)
            assert not Resource.objects.filter(uid=uid_b).exists()
        finally:
            api_a.close()
            apiclient.reset()
