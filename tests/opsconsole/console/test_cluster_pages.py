"""The console across clusters (issue 41) through the Django test client: the navigation's picker (only the
clusters a user may see, kept by the links), the overview's per-cluster counts and connection health with their
total, the overview and resources list narrowed to a picked cluster or to clusters by label, the Cluster column,
the detail page naming its cluster, and an unreachable cluster's objects shown "unknown since …", never deleted."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from opsconsole.console.clusters import ClusterChoice
from reconcilers.models import Cluster
from reconcilers.services.selectors import cluster_health
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db


def _two_clusters() -> None:
    """`prod` (env=prod, reporting now) and `staging` (env=staging) beside `default`: resources in each."""
    now = timezone.now()
    f.cluster("prod", labels={"env": "prod"}, leader="ctl-prod-0", heartbeat_at=now, last_list_at=now,
              watch_lag_seconds=0.4, api_requests=200, api_errors=10)
    f.cluster("staging", labels={"env": "staging"}, heartbeat_at=now)
    f.resource("web", "team-a", cluster="prod", phase="Running")
    f.resource("db", "team-a", cluster="prod", phase="Pending")
    f.resource("web", "team-a", cluster="staging", phase="Running")
    f.resource("solo", "team-b", phase="Degraded")


def _names(html: str) -> list[str]:
    return re.findall(r'class="res-name">([^<]+)<', html)


def _text(html: str) -> str:
    """The text of `html`, tags removed."""
    return re.sub(r"<[^>]+>", "", html)


def _row(html: str, name: str) -> str:
    return html.split(f'id="cluster-{name}"', 1)[1].split("</tr>", 1)[0]


def test_the_picker_lists_the_clusters_a_user_may_see_and_links_keep_the_choice(as_role):
    _two_clusters()
    html = as_role("viewer").get("/?cluster=prod").content.decode()
    picker = html.split('id="cluster-picker"', 1)[1].split("</form>", 1)[0]
    assert re.findall(r'<option value="([^"]*)"', picker) == ["", "default", "prod", "staging"]
    assert '<option value="prod" selected>' in picker
    assert 'href="/resources/?cluster=prod">Resources' in html  # the choice travels with the navigation
    limited = as_role("viewer", ["prod/team-a"]).get("/").content.decode()
    assert 'id="cluster-picker"' not in limited  # one cluster visible: nothing to pick
    assert "staging" not in limited


def test_a_single_cluster_install_shows_no_picker_and_no_cluster_column(as_role):
    f.resource("only")
    client = as_role("viewer")
    assert 'id="cluster-picker"' not in client.get("/").content.decode()
    html = client.get("/resources/").content.decode()
    assert "only" in _names(html) and "cluster-cell" not in html


def test_the_overview_counts_per_cluster_and_in_total_and_shows_each_connection(as_role):
    _two_clusters()
    html = as_role("viewer").get("/").content.decode()
    prod = _row(html, "prod")
    assert 'class="cluster-total"><a href="/resources/?cluster=prod">2</a>' in prod
    assert 'data-phase="Pending">1<' in prod and 'data-phase="Running">1<' in prod
    assert "connected" in prod and "ctl-prod-0" in prod and "0.4 s" in prod
    assert "5 %" in prod and "(10 of 200)" in prod  # the API error rate
    assert "env=prod" in prod
    assert 'data-phase="Degraded">1<' in _row(html, "default")
    total = html.split('id="cluster-total"', 1)[1].split("</tr>", 1)[0]
    assert 'class="cluster-total">4<' in total


def test_a_picked_cluster_narrows_the_overview(as_role):
    _two_clusters()
    html = as_role("viewer").get("/?cluster=staging").content.decode()
    assert 'id="cluster-staging"' in html and 'id="cluster-prod"' not in html
    assert 'id="cluster-total"' not in html  # one cluster: no total row
    machines = html.split('id="machines-h"', 1)[1]
    assert "/resources/?cluster=staging&amp;kind=Memcached&amp;phase=Running" in machines  # links keep the choice
    assert re.search(r'data-phase="Running">1<', _row(html, "staging"))
    assert '<h1>Overview <span class="muted">· cluster staging</span></h1>' in html
    assert 'href="?window=15m&amp;cluster=staging"' in html


def test_the_overview_counts_only_what_a_limited_user_may_see(as_role):
    _two_clusters()
    html = as_role("viewer", ["prod/team-a", "team-b"]).get("/").content.decode()
    assert 'class="cluster-total"><a href="/resources/?cluster=prod">2</a>' in _row(html, "prod")
    # team-b of every cluster: staging is visible, but its one resource (in team-a) is not counted
    assert 'class="cluster-total"><a href="/resources/?cluster=staging">0</a>' in _row(html, "staging")
    assert 'data-phase="Degraded">1<' in _row(html, "default")


def test_an_unknown_cluster_is_an_error_naming_the_field_not_everything(as_role):
    _two_clusters()
    client = as_role("viewer", ["prod/team-a"])
    for path in ("/?cluster=staging", "/resources/?cluster=staging"):
        html = client.get(path).content.decode()
        assert "cluster: no cluster named &#x27;staging&#x27; that you may see" in html, path
    assert _names(client.get("/resources/?cluster=staging").content.decode()) == []


def test_the_resources_list_filters_by_cluster_and_cluster_label(as_role):
    _two_clusters()
    client = as_role("viewer")
    html = client.get("/resources/").content.decode()
    assert sorted(_names(html)) == ["db", "solo", "web", "web"]
    assert re.findall(r'class="cluster-cell">([^<]+)<', html).count("prod") == 2  # the Cluster column
    assert sorted(_names(client.get("/resources/?cluster=prod").content.decode())) == ["db", "web"]
    assert _names(client.get("/resources/?cluster_label=env%3Dstaging").content.decode()) == ["web"]
    assert sorted(_names(client.get("/resources/?cluster_label=env").content.decode())) == ["db", "web", "web"]
    assert _names(client.get("/resources/?cluster=prod&cluster_label=env%3Dstaging").content.decode()) == []
    bad = client.get("/resources/?cluster_label=env%3D%3D%3D").content.decode()
    assert "cluster_label: " in bad and _names(bad) == []
    paged = client.get("/resources/?cluster=prod&size=10&sort=-name").content.decode()
    assert "cluster=prod" in paged.split('id="resources-table"', 1)[1].split("</thead>", 1)[0]  # sort links keep it


def test_the_detail_page_names_its_cluster(as_role):
    _two_clusters()
    res = f.resource("cache", "team-a", cluster="prod")
    html = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    assert 'id="res-cluster">cluster prod</a>' in html
    assert "in cluster prod" in html
    assert 'id="unknown-since"' not in html


def test_an_unreachable_clusters_objects_are_unknown_since_never_deleted(as_role, settings):
    settings.OPSCONSOLE_CLUSTER_HEALTH_SECONDS = 10
    _two_clusters()
    lost = timezone.now() - timedelta(minutes=5)
    Cluster.objects.filter(name="staging").update(heartbeat_at=lost)  # 30 s without a report: unreachable
    res = f.resource("api", "team-a", cluster="staging")
    client = as_role("viewer")
    overview = client.get("/").content.decode()
    row = _row(overview, "staging")
    assert "badge-bad" in row and "unreachable since 5 min ago" in _text(row)
    assert "connected" in _row(overview, "prod")
    listed = client.get("/resources/?cluster=staging").content.decode()
    table = _text(listed.split('id="resources-table"', 1)[1])
    assert table.count("unknown since 5 min ago") == 2 and table.count("Running") == 2  # web, api: not Deleted
    assert "Deleted" not in table
    detail = client.get(f"/resources/{res.pk}/").content.decode()
    assert 'id="unknown-since"' in detail and "unknown since 5 min ago" in _text(detail)
    head = _text(detail.split('id="phase"', 1)[1].split("</dl>", 1)[0])
    assert "Running" in head and "Deleted" not in head  # the last phase seen, and no deletion
    Cluster.objects.filter(name="staging").update(heartbeat_at=timezone.now(), unreachable_since=lost)
    again = _text(client.get(f"/resources/{res.pk}/").content.decode())  # the controller said it lost it
    assert "unknown since 5 min ago" in again


def test_the_cluster_state_rules():
    now = timezone.now()
    c = Cluster(name="x")
    assert cluster_health.cluster_state(c, now) == (cluster_health.UNREPORTED, None)
    c.heartbeat_at = now - timedelta(seconds=3 * cluster_health.report_seconds() - 1)
    assert cluster_health.cluster_state(c, now) == (cluster_health.OK, None)
    c.heartbeat_at = now - timedelta(seconds=3 * cluster_health.report_seconds() + 1)
    assert cluster_health.cluster_state(c, now) == (cluster_health.UNREACHABLE, c.heartbeat_at)
    c.removed_at = now
    assert cluster_health.cluster_state(c, now) == (cluster_health.REMOVED, now)


def test_a_choice_narrows_a_limit_to_the_chosen_clusters_pairs():
    _two_clusters()
    choice = ClusterChoice(clusters=list(Cluster.objects.all()), name="prod", chosen=frozenset({"prod"}))
    assert choice.narrow(None).pairs == {("prod", "team-a")}
    assert choice.narrow(frozenset({"team-a", "team-b"})).pairs == {("prod", "team-a"), ("prod", "team-b")}
    from reconcilers.services.selectors.scope import Scope

    assert choice.narrow(Scope([("staging", "team-a"), ("", "team-b")])).pairs == {("prod", "team-b")}
    assert ClusterChoice(clusters=[]).narrow(None) is None
    every = ClusterChoice(clusters=choice.clusters, chosen=frozenset({"default", "prod", "staging"}))
    assert every.narrow(None) is None  # every cluster chosen: no narrowing to pay for
    assert every.narrow(frozenset({"team-a"})).pairs == {("default", "team-a"), ("prod", "team-a"),
                                                         ("staging", "team-a")}


def test_the_audit_logs_transitions_follow_the_picker(as_role):
    _two_clusters()
    f.transition(f.resource("moved-prod", "team-a", cluster="prod", phase=""), "Pending")
    f.transition(f.resource("moved-here", "team-a", phase=""), "Pending")
    client = as_role("viewer")
    every = _text(client.get("/audit/").content.decode())
    assert "prod: Memcached team-a/moved-prod" in every and "default: Memcached team-a/moved-here" in every
    html = client.get("/audit/?cluster=prod").content.decode()
    assert "moved-prod" in html and "moved-here" not in html
    assert '<input type="hidden" name="cluster" value="prod">' in html  # the filter form keeps the choice
    assert 'href="/audit/?cluster=prod">Audit log' in html
