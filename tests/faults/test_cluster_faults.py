"""Issue 41's faults across clusters, on real processes (two kubesims, a controller per cluster, two Celery workers,
PostgreSQL):

- **a cluster away and back**: cluster b's API server stops for many health intervals while its controller runs on
  (kubesim with `--data-dir`, stopped and started again on the same port: its objects, its Lease and its kube-system
  uid come back as they were, while the connection is really refused meanwhile — a SIGSTOPped process would accept
  connections and hang them instead, which is another fault). Meanwhile the row says since when it is unreachable,
  the API's /clusters/b says so, and nothing of b is recorded deleted; once back, the controller re-lists: no
  deletion, no transition more, and a change made right after comes through once. The default cluster's objects
  are untouched throughout. A `slow` variant stays away 30 s, past the informers' reconnect backoff cap (10 s), as an
  hour's outage would.
- **wrong credentials**: `runcontroller --cluster b --context bad` (a token the API server refuses) exits non-zero
  at once with an error naming the cluster, the server and 401, no traceback; the row is unreachable and the
  console's overview shows it so (a cluster never registered too: its row is made, unreachable).
  A running controller whose credentials the API server stops accepting (its ServiceAccount deleted) reports its
  cluster unreachable too: the health probe is the identity read, not the unauthenticated /version.
- **an object moved between clusters**: deleted from b, created under the same namespace/name in the default
  cluster: two rows, two chains (b's ends Deleted, the default's begins), each history its own; the chains verify.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from kubesim.testing import KubesimHandle, running_kubesim
from opsconsole.testing.cluster import CrdInstaller
from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import apiclient, dispatch, kube, registry
from reconcilers.engine.clusters import HealthReporter, cluster_identity, cluster_register, cluster_unreachable
from reconcilers.engine.kubeconfig import kubeconfig_with_context
from reconcilers.models import Cluster, Resource, Transition
from tests.fixtures.cluster import POD_DELAYS, package_kubesim
from tests.fixtures.engines import (
    INTEGRATION_RECONCILERS,
    Engine,
    audit_intact,
    engine_running,
    wait_idle,
)
from tests.reconcilers import testkinds
from tests.reconcilers.testkinds import GADGET, gadget
from tests.support import workers
from tests.support.clusters import ClusterController, default_and_b, until
from tests.support.workers import ROOT

pytestmark = [pytest.mark.integration]

kubesim = package_kubesim("module")  # the default cluster: this module's own (no other engine watches it)

HEALTH_SECONDS = 0.5  # the controllers' report interval here (production: 5 s)
GADGET_PATH = f"{GADGET.group}/{GADGET.kind}"


def row(cluster: str, name: str) -> Resource | None:
    return Resource.objects.filter(cluster=cluster, name=name, kind=GADGET.kind).first()


def running(cluster: str, *names: str) -> bool:
    return all((r := row(cluster, n)) is not None and r.phase == "Running" for n in names)


def chain(res: Resource) -> list[tuple[str, str]]:
    return list(Transition.objects.filter(resource_uid=res.uid).order_by("seq").values_list("from_phase", "to_phase"))


def chains(cluster: str) -> dict[str, list[tuple[str, str]]]:
    return {r.name: chain(r) for r in Resource.objects.filter(cluster=cluster, kind=GADGET.kind)}


@pytest.fixture
def persistent_b(tmp_path: Path) -> Iterator[KubesimHandle]:
    """Cluster b's API server: a kubesim keeping its objects in a data directory (so a stop and a start is the same
    cluster), serving the test kinds' CRDs."""
    with running_kubesim(mode="process", data_dir=str(tmp_path / "b-data"), history_size=200_000,
                         **POD_DELAYS) as sim:
        api = kube.build_api_client(sim.kubeconfig)
        CrdInstaller(api).ensure([testkinds.GadgetReconciler])
        api.close()
        yield sim


@pytest.fixture
def two_clusters(kubesim: Any, persistent_b: KubesimHandle, redis_client: Any, django_db_setup: None,
                 django_db_blocker: Any, transactional_db: None, settings: Any, tmp_path: Path
                 ) -> Iterator[tuple[Engine, ClusterController, Any, Any, str]]:
    """The engine on the default cluster and b's controller (context `b` of the merged kubeconfig) started; the
    test's clients of both clusters; a namespace in both."""
    settings.OPSCONSOLE_RECONCILERS = INTEGRATION_RECONCILERS
    settings.OPSCONSOLE_CLUSTER_HEALTH_SECONDS = HEALTH_SECONDS  # the API's staleness rule reads the same interval
    registry.reset()
    try:
        with default_and_b(settings, kubesim.kubeconfig, persistent_b.kubeconfig, tmp_path, HEALTH_SECONDS) as (
                env, api_a, api_b, namespace), \
                engine_running(kubesim, django_db_blocker, prefix="test-cluster-faults", extra_env=env) as engine:
            settings.OPSCONSOLE_WORKQUEUE_NAME = engine.queue_name
            b = ClusterController(engine.queue_name, engine.env, "b")
            try:
                with django_db_blocker.unblock():
                    b.start().wait_ready()
                yield engine, b, api_a, api_b, namespace
                wait_idle(dispatch.get_queue(), timeout=30)
            finally:
                b.stop()
            engine.stop()
    finally:
        registry.reset()
    audit_intact()


@pytest.mark.parametrize("away", [
    8 * HEALTH_SECONDS,
    # long enough for every informer's reconnect backoff to reach its cap (10 s) and stay there: an hour compressed
    pytest.param(30.0, marks=pytest.mark.slow, id="backoff-capped"),
])
def test_a_cluster_away_for_many_health_intervals_comes_back_without_a_ghost_deletion_or_a_transition_more(
        two_clusters, persistent_b, admin, away):
    engine, b, api_a, api_b, ns = two_clusters
    for i in range(3):
        kube.create_object(api_b, GADGET, gadget(ns, f"b-{i}", mode="ok"))
    kube.create_object(api_a, GADGET, gadget(ns, "a-0", mode="ok"))
    until(lambda: running("b", "b-0", "b-1", "b-2") and running(DEFAULT_CLUSTER, "a-0"), "every gadget Running")
    until(lambda: Cluster.objects.filter(name="b", heartbeat_at__isnull=False).exclude(leader="").exists(),
          "cluster b's health reported")
    wait_idle(dispatch.get_queue(), timeout=30)
    before_b, before_a = chains("b"), chains(DEFAULT_CLUSTER)
    assert set(before_b) == {"b-0", "b-1", "b-2"} and all(c[-1][1] == "Running" for c in before_b.values())

    # b's API server away (connections refused), its controller running on
    persistent_b.stop()
    lost = until(lambda: Cluster.objects.filter(name="b", unreachable_since__isnull=False).first(),
                 "cluster b recorded unreachable", timeout=10 * HEALTH_SECONDS + 10)
    health = admin.get("/api/v1/clusters/b").json()["health"]
    assert (health["state"], health["reachable"]) == ("unreachable", False)
    assert health["unknown_since"] is not None
    # the default cluster's controller goes on reporting (eventually: a report late under load reads stale a moment)
    until(lambda: admin.get(f"/api/v1/clusters/{DEFAULT_CLUSTER}").json()["health"]["state"] == "ok",
          "the default cluster ok")
    time.sleep(away)  # the outage lasts: the informers' reconnects back off, the reports keep failing
    assert Cluster.objects.get(name="b").unreachable_since == lost.unreachable_since  # since the loss, not since now
    assert b.proc.poll() is None  # the controller waits for its API server, it does not exit
    assert not Resource.objects.filter(deleted=True).exists()
    assert (chains("b"), chains(DEFAULT_CLUSTER)) == (before_b, before_a)

    # back: the same cluster (its data kept), the controller re-lists it
    back = timezone.now()
    persistent_b.start()
    until(lambda: Cluster.objects.filter(name="b", unreachable_since__isnull=True, last_list_at__gt=back).exists(),
          "cluster b reachable again and re-listed", timeout=45)
    assert admin.get("/api/v1/clusters/b").json()["health"]["state"] == "ok"
    assert Cluster.objects.get(name="b").identity == cluster_identity(api_b)
    wait_idle(dispatch.get_queue(), timeout=30)
    assert not Resource.objects.filter(deleted=True).exists()
    assert (chains("b"), chains(DEFAULT_CLUSTER)) == (before_b, before_a)

    # a change made right after comes through, once
    kube.delete_object(api_b, GADGET, ns, "b-0")
    until(lambda: row("b", "b-0").deleted, "b-0 recorded deleted")
    wait_idle(dispatch.get_queue(), timeout=30)
    after = chains("b")
    assert after["b-0"][:len(before_b["b-0"])] == before_b["b-0"]
    added = after["b-0"][len(before_b["b-0"]):]
    assert added[-1] == ("Terminating", "Deleted") and len(set(added)) == len(added)  # no step twice
    assert {n: after[n] for n in ("b-1", "b-2")} == {n: before_b[n] for n in ("b-1", "b-2")}
    assert chains(DEFAULT_CLUSTER) == before_a
    assert list(Resource.objects.filter(deleted=True).values_list("cluster", "name")) == [("b", "b-0")]


def test_an_object_moved_between_clusters_is_two_histories(two_clusters, admin):
    engine, b, api_a, api_b, ns = two_clusters
    kube.create_object(api_b, GADGET, gadget(ns, "moved", mode="ok"))
    until(lambda: running("b", "moved"), "moved Running in b")
    kube.delete_object(api_b, GADGET, ns, "moved")
    until(lambda: (r := row("b", "moved")) is not None and r.deleted, "moved recorded deleted in b")
    kube.create_object(api_a, GADGET, gadget(ns, "moved", mode="ok"))
    until(lambda: running(DEFAULT_CLUSTER, "moved"), "moved Running in the default cluster")
    wait_idle(dispatch.get_queue(), timeout=30)

    in_b, in_a = row("b", "moved"), row(DEFAULT_CLUSTER, "moved")
    assert Resource.objects.filter(name="moved", namespace=ns).count() == 2
    assert in_b.pk != in_a.pk and in_b.uid != in_a.uid and (in_b.deleted, in_a.deleted) == (True, False)
    assert in_b.key == f"b/{in_a.key}"
    chain_b, chain_a = chain(in_b), chain(in_a)
    assert chain_b[-1] == ("Terminating", "Deleted") and chain_a[0][0] == "" and chain_a[-1][1] == "Running"
    assert ("Terminating", "Deleted") not in chain_a
    for res, own in ((in_b, chain_b), (in_a, chain_a)):
        history = admin.get(f"/api/v1/resources/{res.pk}/transitions").json()["results"]
        assert {(t["resource_id"], t["cluster"]) for t in history} == {(res.pk, res.cluster)}
        assert len(history) == len(own)
    by_key = admin.get(f"/api/v1/clusters/{DEFAULT_CLUSTER}/kinds/{GADGET_PATH}/namespaces/{ns}/moved/transitions")
    assert {t["resource_id"] for t in by_key.json()["results"]} == {in_a.pk}
    # audit_verify runs on the fixture's way out


def test_wrong_credentials_are_a_clear_error_at_start_and_a_red_cluster_in_the_console(
        kubesim, transactional_db, settings, tmp_path, as_role):
    settings.OPSCONSOLE_CLUSTER_HEALTH_SECONDS = HEALTH_SECONDS
    api_b = kube.build_api_client(kubesim.kubeconfig)
    identity = cluster_identity(api_b)
    api_b.close()
    cluster_register("b", identity=identity, server=kubesim.url, context="b")  # a controller ran there before
    kubesim.kubeconfig_for("not-the-token", str(tmp_path / "wrong.yaml"))
    kubeconfig_with_context(tmp_path / "wrong.yaml", "bad", tmp_path / "bad.yaml")
    env = {**os.environ, "DATABASE_URL": workers.test_database_url(), "KUBECONFIG": str(tmp_path / "bad.yaml"),
           "OPSCONSOLE_CONTROLLER_METRICS_PORT": "0", "OPSCONSOLE_TRACING": "off",
           "OPSCONSOLE_CLUSTER_HEALTH_SECONDS": str(HEALTH_SECONDS)}
    api_timeout = 20
    started = time.monotonic()
    done = subprocess.run([sys.executable, "manage.py", "runcontroller", "--cluster", "b", "--context", "bad",
                           "--api-timeout", str(api_timeout)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=api_timeout + 30)
    took = time.monotonic() - started
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    assert "cluster b" in done.stderr and kubesim.url in done.stderr, done.stderr
    assert "401" in done.stderr and "Unauthorized" in done.stderr and "context bad" in done.stderr, done.stderr
    assert took < api_timeout, f"{took:.1f} s"  # refused at once: a 401 is not waited out
    b = Cluster.objects.get(name="b")
    assert b.unreachable_since is not None and b.identity == identity and b.context == "b"  # the good one kept

    # a name never registered: its row is made, unreachable, without an identity
    settings.KUBECONFIG = str(tmp_path / "bad.yaml")
    apiclient.reset()
    try:
        with pytest.raises(CommandError, match="cluster c: .*401 Unauthorized"):
            call_command("runcontroller", "--cluster", "c", "--context", "bad", "--api-timeout", "5")
    finally:
        apiclient.reset()
    c = Cluster.objects.get(name="c")
    assert c.unreachable_since is not None and c.identity == "" and c.server == kubesim.url
    # neither refused controller recorded anything (rows of other clusters: another test's engine sharing the
    # worker's database may record into it at any time)
    assert not Resource.objects.filter(cluster__in=["b", "c"]).exists()

    page = as_role("viewer").get(reverse("console:overview"), {"_live": "clusters"})
    assert page.status_code == 200
    html = page.json()["fragments"]["clusters"]  # the overview's Clusters table
    for name in ("b", "c"):  # (other clusters of this worker's database may be shown too, stale or not)
        assert f'id="cluster-{name}" class="cluster-row cluster-unreachable"' in html, html
        row = html.split(f'id="cluster-{name}"', 1)[1].split("</tr>", 1)[0]
        assert '<span class="badge badge-bad">unreachable</span>' in row, row


SERVICE_ACCOUNTS = ResourceKind("", "v1", "serviceaccounts", "ServiceAccount")


def test_credentials_revoked_under_a_running_controller_make_its_cluster_unreachable(
        kubesim, transactional_db, settings, tmp_path, admin):
    settings.OPSCONSOLE_CLUSTER_HEALTH_SECONDS = HEALTH_SECONDS
    api_admin = kube.build_api_client(kubesim.kubeconfig)
    account = f"ctl-{uuid.uuid4().hex[:6]}"
    kube.create_object(api_admin, SERVICE_ACCOUNTS, {"metadata": {"name": account, "namespace": "default"}})
    token = kube.request_json(api_admin, "POST", f"/api/v1/namespaces/default/serviceaccounts/{account}/token",
                              body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
                              )["status"]["token"]
    api = kube.build_api_client(kubesim.kubeconfig_for(token, str(tmp_path / "sa.yaml")))
    try:
        cluster_register("b", identity=cluster_identity(api), server=kubesim.url)
        reporter = HealthReporter(api, "b", identity="ctl-1", leading=lambda: True, listed_at=lambda: [],
                                  interval=HEALTH_SECONDS)
        assert reporter.report()
        assert admin.get("/api/v1/clusters/b").json()["health"]["state"] == "ok"

        kube.delete_object(api_admin, SERVICE_ACCOUNTS, "default", account)  # its token is refused from now on (401)
        assert kube.server_version(api)  # /version still answers: it needs no credentials
        assert reporter.report()
        b = Cluster.objects.get(name="b")
        assert b.unreachable_since is not None and b.leader == "ctl-1"
        assert admin.get("/api/v1/clusters/b").json()["health"]["state"] == "unreachable"
    finally:
        api.close()
        api_admin.close()


def test_a_failed_start_leaves_a_removed_cluster_and_one_reported_lately_as_they_are(transactional_db, settings):
    settings.OPSCONSOLE_CLUSTER_HEALTH_SECONDS = HEALTH_SECONDS
    now = timezone.now()
    Cluster.objects.create(name="gone", identity="u-1", removed_at=now)
    Cluster.objects.create(name="live", identity="u-2", leader="ctl", heartbeat_at=now)
    Cluster.objects.create(name="stale", identity="u-3", leader="ctl", heartbeat_at=now - timedelta(minutes=5))
    assert not cluster_unreachable("gone", server="https://x")
    assert not cluster_unreachable("live", server="https://x")  # another replica reaches it: its report stands
    assert cluster_unreachable("stale", server="https://x", context="bad")
    assert not cluster_unreachable("stale")  # since the first failure, not the latest
    assert cluster_unreachable("new", server="https://x", context="bad")
    rows = {c.name: c for c in Cluster.objects.all()}
    assert rows["gone"].unreachable_since is None and rows["live"].unreachable_since is None
    assert rows["stale"].unreachable_since is not None and rows["stale"].context == ""  # its registration kept
    assert (rows["new"].identity, rows["new"].server, rows["new"].context) == ("", "https://x", "bad")
    with pytest.raises(ValueError):
        cluster_unreachable("Not_A_Name")
