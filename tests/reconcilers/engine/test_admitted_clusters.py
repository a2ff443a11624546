"""Issue 41: admitted writes are per cluster. The same namespace/name in two clusters has two lists; a write
admitted by one cluster's webhook server is never credited to the other cluster's object (the provenance bug),
whether looked up by the run of a key of that cluster (`provenance.in_cluster`) or by a deletion recorded for a
row of that cluster; an entry moved onto another cluster's list is not found there (its cluster is signed)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from django.conf import settings

from reconcilers.core import actors
from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.engine import admitted, provenance
from reconcilers.engine.recording_rows import revision_row
from reconcilers.models import Resource
from tests.reconcilers.audit_support import KIND

B = "b"
NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


@pytest.fixture
def admitted_redis():
    """The Redis admitted writes are noted in, emptied of them after."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    for key in client.scan_iter(f"{admitted.PREFIX}*"):
        client.delete(key)


def obj(uid: str = "u-1") -> dict[str, Any]:
    return {"metadata": {"namespace": "shop", "name": "web", "uid": uid}, "spec": {"size": 2}}


def note(client: Any, cluster: str, username: str, operation: str = "DELETE") -> None:
    """What the webhook server of `cluster` does for an admitted write of the object by `username`."""
    request = {"operation": operation, "userInfo": {"username": username},
               ("oldObject" if operation == "DELETE" else "object"): obj()}
    admitted.admitted_note(client, admitted.signing_key(settings.SECRET_KEY), KIND.group, KIND.kind, "shop", "web",
                           admitted.entry_from_request(request), cluster)


def find(client: Any, cluster: str) -> dict[str, Any] | None:
    return admitted.admitted_find(client, admitted.signing_key(settings.SECRET_KEY), KIND.group, KIND.kind,
                                  "shop", "web", match=lambda e: True, cluster=cluster)


def test_the_default_clusters_list_keeps_its_form_and_another_clusters_names_it():
    assert admitted.object_key("g", "K", "ns", "n") == f"{admitted.PREFIX}g/K/ns/n"  # as before clusters
    assert admitted.object_key("g", "K", "ns", "n", DEFAULT_CLUSTER) == f"{admitted.PREFIX}g/K/ns/n"
    assert admitted.object_key("g", "K", "ns", "n", B) == f"{admitted.PREFIX}b/g/K/ns/n"
    assert admitted.object_key("g", "K", "", "n", B) != admitted.object_key("b", "g", "K", "n")


def test_an_admission_in_one_cluster_is_never_found_for_the_same_object_in_the_other(admitted_redis):
    note(admitted_redis, B, "bob")
    assert find(admitted_redis, DEFAULT_CLUSTER) is None
    found = find(admitted_redis, B)
    assert found is not None and found["user"]["username"] == "bob" and found["cluster"] == B
    note(admitted_redis, DEFAULT_CLUSTER, "dora")
    assert find(admitted_redis, DEFAULT_CLUSTER)["user"]["username"] == "dora"
    assert "cluster" not in find(admitted_redis, DEFAULT_CLUSTER)  # the default cluster's entries as before
    assert find(admitted_redis, B)["user"]["username"] == "bob"


def test_an_entry_moved_onto_another_clusters_list_is_not_found_there(admitted_redis):
    note(admitted_redis, B, "bob")
    entry = admitted_redis.lindex(admitted.object_key(KIND.group, KIND.kind, "shop", "web", B), 0)
    admitted_redis.lpush(admitted.object_key(KIND.group, KIND.kind, "shop", "web", "c"), entry)
    admitted_redis.lpush(admitted.object_key(KIND.group, KIND.kind, "shop", "web"), entry)
    assert find(admitted_redis, "c") is None and find(admitted_redis, DEFAULT_CLUSTER) is None


def test_the_engines_lookups_read_the_runs_cluster_and_a_rows_cluster(admitted_redis):
    note(admitted_redis, B, "bob")
    assert provenance.current_cluster() == DEFAULT_CLUSTER
    assert provenance.deletion_actor(KIND, "shop", "web", "u-1") == actors.UNKNOWN  # not the default's
    with provenance.in_cluster(B):  # a run of a key of cluster b
        assert provenance.current_cluster() == B
        assert provenance.deletion_actor(KIND, "shop", "web", "u-1") == actors.kube_actor("bob")
    assert provenance.current_cluster() == DEFAULT_CLUSTER
    assert provenance.deletion_actor(KIND, "shop", "web", "u-1", B) == actors.kube_actor("bob")  # a row's cluster
    note(admitted_redis, DEFAULT_CLUSTER, "dora")
    with provenance.in_cluster(B):
        assert provenance.deletion_actor(KIND, "shop", "web", "u-1") == actors.kube_actor("bob")
    assert provenance.deletion_actor(KIND, "shop", "web", "u-1") == actors.kube_actor("dora")


def test_a_spec_admitted_in_the_other_cluster_stays_a_claim_here(admitted_redis):
    note(admitted_redis, B, "bob", operation="UPDATE")
    assert provenance.spec_actor(KIND, obj(), "kubectl")[0] == actors.manager_claim("kubectl")
    with provenance.in_cluster(B):
        assert provenance.spec_actor(KIND, obj(), "kubectl")[0] == actors.kube_actor("bob")


def test_a_spec_revision_recorded_for_a_row_of_cluster_b_reads_bs_admitted_writes(admitted_redis):
    note(admitted_redis, B, "bob", operation="UPDATE")
    live = {**obj(), "apiVersion": f"{KIND.group}/{KIND.version}", "kind": KIND.kind}
    live["metadata"] = {**live["metadata"], "generation": 2}
    row_b = Resource(cluster=B, uid="u-1", kind=KIND.kind, namespace="shop", name="web")
    row_default = Resource(uid="u-1", kind=KIND.kind, namespace="shop", name="web")
    assert revision_row(row_b, live, NOW, {}).actor == actors.kube_actor("bob")  # not inside a run of b: the row's
    assert revision_row(row_default, live, NOW, {}).actor != actors.kube_actor("bob")
