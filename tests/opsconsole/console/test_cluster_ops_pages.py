"""The console's queue, workers and objectives pages across clusters (issue 41), through the Django test client:
each narrowed by the navigation's picker (`?cluster=`) shows none of another cluster's keys, runs or transitions; a
user granted only `prod/…` never sees staging's keys on the queue page even without choosing; the navigation keeps
the choice; the audit log's export links carry it; the overview's engine strip names each cluster's leader."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from reconcilers.models import ReconcileRun
from reconcilers.services import workers
from reconcilers.services.selectors import liveness
from tests.opsconsole.api import factories as f
from tests.reconcilers.services.test_workers import FakeInspect, stats_reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def two():
    """`prod` and `staging` registered beside `default`, one Memcached `web` in team-a of each."""
    now = timezone.now()
    f.cluster("prod", leader="ctl-prod-0", heartbeat_at=now)
    f.cluster("staging", leader="ctl-staging-0", heartbeat_at=now)
    return {c: f.resource("web", "team-a", cluster=c) for c in ("default", "prod", "staging")}


@pytest.fixture
def inspect(monkeypatch):
    """The workers service reads the fake given instead of broadcasting."""
    workers.workers_cache_clear()
    yield lambda fake: monkeypatch.setattr(workers, "_default_inspect", fake)
    workers.workers_cache_clear()


def test_the_queue_narrowed_to_a_cluster_lists_only_its_keys_and_counts(as_role, queue, two):
    for res in two.values():
        queue.add_after(res.key, 30)
    assert two["prod"].key.startswith("prod/") and two["staging"].key.startswith("staging/")
    client = as_role("admin")
    html = client.get("/queue/?cluster=prod").content.decode()
    assert f"<code>{two['prod'].key}</code>" in html
    assert two["staging"].key not in html and f"<code>{two['default'].key}</code>" not in html
    assert re.search(r'id="queue-depth">0<.*?1 delayed', html, re.S)  # the counts are of the keys shown
    every = client.get("/queue/").content.decode()
    assert all(f"<code>{res.key}</code>" in every for res in two.values())
    assert 'href="/queue/?cluster=prod">Queue' in html  # the navigation keeps the choice
    assert 'href="/workers/?cluster=prod">Workers' in html and 'href="/slo/?cluster=prod">Objectives' in html


def test_a_user_granted_only_prod_never_sees_stagings_keys_on_the_queue_page(as_role, queue, two):
    for res in two.values():
        queue.add_after(res.key, 30)
    html = as_role("admin", ["prod/team-a"]).get("/queue/").content.decode()  # no choice made
    assert f"<code>{two['prod'].key}</code>" in html
    assert two["staging"].key not in html and f"<code>{two['default'].key}</code>" not in html
    chose = as_role("admin", ["prod/team-a"]).get("/queue/?cluster=staging")
    text = chose.content.decode()
    assert chose.status_code == 200 and "no cluster named &#x27;staging&#x27; that you may see" in text
    assert two["staging"].key not in text and two["prod"].key not in text  # a choice it may not make: nothing


def test_an_empty_queue_narrowed_counts_only_the_chosen_clusters_runs(as_role, queue, two):
    f.run(two["prod"])
    f.run(two["staging"], result="error")
    f.run(two["staging"])
    html = as_role("viewer").get("/queue/?cluster=prod").content.decode()
    assert re.search(r'id="queue-recent-runs">1<.*id="queue-recent-failed">0<', html, re.S)
    assert 'href="/workers/?cluster=prod" id="queue-workers-link"' in html
    html = as_role("viewer").get("/queue/").content.decode()
    assert re.search(r'id="queue-recent-runs">3<.*id="queue-recent-failed">1<', html, re.S)


def _version_rows(html: str) -> list[str]:
    return re.findall(r'class="version[^"]*" data-version="([^"]+)"', html)


def test_the_workers_page_narrowed_to_a_cluster_counts_and_compares_only_its_runs(as_role, inspect, two):
    for cluster, version, result in (("prod", "v-prod", "success"), ("staging", "v-staging", "error"),
                                     ("staging", "v-staging", "error")):
        res = two[cluster]
        ReconcileRun.objects.create(key=res.key, cluster=cluster, kind=res.kind, resource=res, result=result,
                                    started_at=timezone.now(), duration_seconds=0.1, worker="host1:101",
                                    operator_version=version)
    inspect(FakeInspect(
        {"a@host1": stats_reply(100, [101])},
        {"a@host1": [{"name": "reconcilers.reconcile", "args": [two["staging"].key], "kwargs": {},
                      "time_start": time.time(), "worker_pid": 101}]},
    ))
    client = as_role("viewer")
    html = client.get("/workers/?cluster=prod").content.decode()
    assert _version_rows(html) == ["v-prod"]
    worker = html.split('data-worker="a@host1"', 1)[1].split("</tr>", 1)[0]
    assert "a key of another cluster" in worker and two["staging"].key not in html
    assert "0 failed" in worker and "1 failed" not in worker and "2 failed" not in worker
    assert "in prod (the cluster chosen)" in html and 'href="/queue/?cluster=prod">the queue' in html
    every = client.get("/workers/").content.decode()
    assert sorted(_version_rows(every)) == ["v-prod", "v-staging"] and "2 failed" in every
    assert two["staging"].key in every  # its running key, seen without a choice


def _attainment(html: str) -> str:
    row = html[html.index('data-kind="Memcached"'):]
    row = row[:row.index("</tr>")]
    return re.search(r'data-window="1h">(.*?)</td>', row, re.S).group(1)


def test_the_objectives_narrowed_to_a_cluster_count_only_its_transitions(as_role, two):
    now = timezone.now()
    for cluster, stayed in (("prod", timedelta(seconds=30)), ("staging", timedelta(minutes=20))):
        res = f.resource("slo", "team-a", cluster=cluster, phase="")
        f.transition(res, "Pending", at=now - stayed - timedelta(seconds=5))
        f.transition(res, "Running", at=now - timedelta(seconds=5))  # left Pending: within 5 min in prod only
    client = as_role("viewer")
    assert "(1/1)" in _attainment(client.get("/slo/?cluster=prod").content.decode())
    assert "(0/1)" in _attainment(client.get("/slo/?cluster=staging").content.decode())
    assert "(1/2)" in _attainment(client.get("/slo/").content.decode())
    assert "(0/1)" in _attainment(as_role("viewer", ["staging/team-a"]).get("/slo/").content.decode())


def test_the_audit_logs_export_links_carry_the_chosen_cluster(as_role, two):
    html = as_role("viewer").get("/audit/?cluster=prod&kind=Memcached").content.decode()
    links = re.findall(r'href="(/api/v1/transitions\.(?:csv|jsonl)\?[^"]*)"', html)
    assert len(links) == 2 and all("cluster=prod" in link and "kind=Memcached" in link for link in links)
    plain = as_role("viewer").get("/audit/").content.decode()
    assert "cluster=" not in "".join(re.findall(r'href="(/api/v1/transitions\.[^"]*)"', plain))


def test_the_engine_strip_names_each_clusters_leader_when_several_are_registered(as_role, monkeypatch, two):
    def no_lease(**_):
        raise AssertionError("the strip reads the clusters' reports, not the default cluster's Lease")

    monkeypatch.setattr(liveness, "controller_leader", no_lease)
    f.cluster("default", leader="ctl-default-0", heartbeat_at=timezone.now() - timedelta(hours=1))
    html = as_role("viewer").get("/?_live=engine").json()["fragments"]["engine"]
    strip = html.split('id="cluster-leaders"', 1)[1].split("</ul>", 1)[0]
    assert re.findall(r'id="leader-([^"]+)"', strip) == ["default", "prod", "staging"]
    prod = strip.split('id="leader-prod"', 1)[1].split("</li>", 1)[0]
    assert "leading" in prod and "ctl-prod-0" in prod
    assert "unreachable" in strip.split('id="leader-default"', 1)[1].split("</li>", 1)[0]  # its report is stale
    narrowed = as_role("viewer").get("/?_live=engine&cluster=prod").json()["fragments"]["engine"]
    assert re.findall(r'id="leader-([^"]+)"', narrowed) == ["prod"] and 'href="/queue/?cluster=prod"' in narrowed


def test_a_single_cluster_install_keeps_the_leader_lease_in_the_strip(as_role, monkeypatch):
    monkeypatch.setattr(liveness, "controller_leader", lambda **_: {"holder": "ctl-0", "renewed": timezone.now(),
                                                                 "expires": None, "alive": True, "error": ""})
    html = as_role("viewer").get("/?_live=engine").json()["fragments"]["engine"]
    assert "cluster-leaders" not in html and "<code>ctl-0</code>" in html
