"""Issue 41: `manage.py clusters` lists the registered clusters (server, identity, labels, health state, live
resources), labels them, removes one (its history stays, its controller refuses to start) and restores it; every
change, refused ones too, is on the action record with the `cli:` actor."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.utils import timezone

from reconcilers.engine.clusters import ClusterRefused, cluster_register
from reconcilers.engine.recording_rows import transition_append
from reconcilers.models import ActionRecord, Cluster, Resource, Transition

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("clusters", *args, stdout=out)
    return out.getvalue()


def records(action: str) -> list[ActionRecord]:
    return list(ActionRecord.objects.filter(action=action).order_by("id"))


def resource(cluster: str, name: str, deleted: bool = False) -> Resource:
    return Resource.objects.create(cluster=cluster, key=f"{cluster}/cache.example.com/v1alpha1/memcacheds/shop/{name}",
                                   group="cache.example.com", version="v1alpha1", kind="Memcached",
                                   namespace="shop", name=name, uid=f"{cluster}-{name}", deleted=deleted)


def test_list_names_server_identity_labels_state_and_live_resources():
    Cluster.objects.create(name="prod", server="https://prod:6443", identity="uid-prod", labels={"env": "prod"},
                           heartbeat_at=timezone.now(), leader="ctl-0")
    Cluster.objects.create(name="old", heartbeat_at=timezone.now() - timedelta(hours=1))
    resource("prod", "a"), resource("prod", "b"), resource("prod", "c", deleted=True)
    rows = {r["name"]: r for r in json.loads(run("list", "--json"))}
    assert rows["prod"] == {"name": "prod", "server": "https://prod:6443", "identity": "uid-prod",
                            "labels": {"env": "prod"}, "state": "ok", "since": None, "resources": 2}
    assert rows["old"]["state"] == "unreachable" and rows["old"]["resources"] == 0
    assert rows["default"]["state"] == "unreported"
    table = run("list").splitlines()
    assert table[0].split() == ["NAME", "SERVER", "IDENTITY", "LABELS", "STATE", "RESOURCES"]
    assert [line.split()[0] for line in table[1:]] == ["default", "old", "prod"]
    assert "https://prod:6443" in table[3] and "env=prod" in table[3] and table[3].split()[-1] == "2"


def test_label_sets_and_removes_and_a_bad_one_is_refused_and_recorded():
    Cluster.objects.create(name="prod", labels={"env": "staging", "tier": "1"})
    assert "env=prod,region=eu-1" in run("label", "prod", "env=prod", "region=eu-1", "tier-")
    assert Cluster.objects.get(name="prod").labels == {"env": "prod", "region": "eu-1"}
    (done,) = records("cluster.label")
    assert (done.outcome, done.status_code, done.target, done.cluster) == ("allowed", 200, "cluster:prod", "prod")
    assert done.actor.startswith("cli:") and done.auth == "command"
    assert done.detail["before"] == {"env": "staging", "tier": "1"}
    assert done.detail["after"] == {"env": "prod", "region": "eu-1"}
    for bad in (["env=no spaces"], ["-"], ["env=a", "env-"], ["bad key=x"]):
        with pytest.raises(CommandError):
            run("label", "prod", *bad)
    assert Cluster.objects.get(name="prod").labels == {"env": "prod", "region": "eu-1"}
    refused = records("cluster.label")[1:]
    assert len(refused) == 4 and {r.status_code for r in refused} == {400}
    with pytest.raises(CommandError, match="no registered cluster"):
        run("label", "nowhere", "env=x")
    assert records("cluster.label")[-1].status_code == 404 and records("cluster.label")[-1].cluster == "default"


def test_remove_keeps_the_history_refuses_the_controller_and_restore_lets_it_back():
    cluster_register("prod", identity="uid-prod")
    row = resource("prod", "a")
    with transaction.atomic():
        transition_append(Resource.objects.select_for_update().get(pk=row.pk), to_phase="Running", reason="Test",
                          message="", actor="controller")
    assert "removed at" in run("remove", "prod")
    removed = Cluster.objects.get(name="prod").removed_at
    assert removed is not None
    assert Resource.objects.filter(cluster="prod").count() == 1  # its history stays
    assert Transition.objects.filter(cluster="prod").count() == 1
    with pytest.raises(ClusterRefused, match="removed"):
        cluster_register("prod", identity="uid-prod")  # its controller refuses to start
    with pytest.raises(CommandError, match="removed already"):
        run("remove", "prod")
    assert json.loads(run("list", "--json"))[1]["state"] == "removed"
    assert "restored" in run("restore", "prod")
    assert Cluster.objects.get(name="prod").removed_at is None
    assert cluster_register("prod", identity="uid-prod").name == "prod"
    with pytest.raises(CommandError, match="not removed"):
        run("restore", "prod")
    assert [(r.status_code, r.cluster) for r in records("cluster.remove")] == [(200, "prod"), (409, "prod")]
    assert [r.status_code for r in records("cluster.restore")] == [200, 409]
    assert records("cluster.restore")[0].detail["was_removed_at"] == removed.isoformat()


def test_the_default_cluster_and_a_bad_name_are_refused_and_recorded():
    with pytest.raises(CommandError, match="default cluster cannot be removed"):
        run("remove", "default")
    with pytest.raises(CommandError, match="DNS label"):
        run("remove", "Not_A_Name")
    assert Cluster.objects.get(name="default").removed_at is None
    assert [r.status_code for r in records("cluster.remove")] == [409, 400]
