"""The health tree on the detail page and the generic object page, with the Kubernetes API faked (kube's GET and
LIST replaced): the tree's rows, links and waiting reason; the object page's YAML without managedFields, its
Events and owner chain; a kind the console does not show (a Secret) and an object outside the user's
namespaces are 404s; an unreachable API is a message, never a 500."""

from __future__ import annotations

import pytest

from reconcilers.engine import apiclient, kube
from reconcilers.services.selectors import health_tree as ht
from tests.opsconsole.api import factories as f

POD_PATH = "/objects/core/v1/pods/{ns}/mc-abc-x/"


def _obj(kind, api_version, name, uid, owner="", namespace="team-a", **body):
    meta = {"name": name, "uid": uid, "namespace": namespace, "managedFields": [{"manager": "kubectl"}]}
    if owner:
        meta["ownerReferences"] = [{"uid": owner[1], "controller": True, "kind": owner[0], "name": owner[2],
                                    "apiVersion": owner[3]}]
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **body}


class FakeCluster:
    """kube.get_object / list_objects over a few objects (Memcached → Deployment → ReplicaSet → Pod)."""

    def __init__(self, mc_uid: str, namespace: str = "team-a") -> None:
        waiting = {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image memcached:broken"}}
        self.objects = {
            "deployments": [_obj("Deployment", "apps/v1", "mc", "d1", ("Memcached", mc_uid, "mc",
                                 "cache.example.com/v1alpha1"), namespace, spec={"replicas": 1}, status={})],
            "replicasets": [_obj("ReplicaSet", "apps/v1", "mc-abc", "rs1", ("Deployment", "d1", "mc", "apps/v1"),
                                 namespace, spec={"replicas": 1}, status={})],
            "pods": [_obj("Pod", "v1", "mc-abc-x", "p1", ("ReplicaSet", "rs1", "mc-abc", "apps/v1"), namespace,
                          spec={"containers": [{"name": "memcached", "image": "memcached:broken"}]},
                          status={"phase": "Pending", "containerStatuses": [
                              {"name": "memcached", "ready": False, "state": waiting}]})],
            "events": [{"metadata": {"name": "mc-abc-x.1", "namespace": namespace}, "type": "Warning",
                        "reason": "Failed", "message": "Failed to pull image memcached:broken", "count": 3,
                        "involvedObject": {"uid": "p1"}}],
            "secrets": [_obj("Secret", "v1", "token", "s1", namespace=namespace, data={"k": "c2VjcmV0"})],
        }
        self.gets, self.lists = [], []

    def get(self, api, kind, namespace, name, **kwargs):
        self.gets.append((kind.plural, name))
        found = [o for o in self.objects.get(kind.plural, []) if o["metadata"]["name"] == name]
        return {**found[0], "metadata": dict(found[0]["metadata"])} if found else None

    def list(self, api, kind, namespace=None, *, field_selector=None, **kwargs):
        self.lists.append((kind.plural, field_selector))
        items = self.objects.get(kind.plural, [])
        if field_selector:
            uid = field_selector.split("=", 1)[1]
            items = [e for e in items if e["involvedObject"]["uid"] == uid]
        return kube.ListResult([dict(o) for o in items], "1")


@pytest.fixture
def cluster(monkeypatch, builtin_kinds_only):
    ht.cache_clear()

    def make(mc_uid: str) -> FakeCluster:
        fake = FakeCluster(mc_uid)
        monkeypatch.setattr(kube, "get_object", fake.get)
        monkeypatch.setattr(kube, "list_objects", fake.list)
        monkeypatch.setattr(apiclient, "get_api_client", lambda *_: object())
        return fake

    yield make
    ht.cache_clear()


def test_the_detail_page_shows_the_tree_with_the_pods_waiting_reason_and_links(as_role, cluster):
    res = f.resource("mc", "team-a")
    cluster(res.uid)
    body = as_role("viewer", ["team-a"]).get(f"/resources/{res.pk}/").content.decode()
    assert 'id="health-tree"' in body and "ImagePullBackOff" in body
    assert 'data-kind="Pod" data-name="mc-abc-x" data-health="Failed"' in body
    assert f'href="{POD_PATH.format(ns="team-a")}"' in body
    assert 'href="/objects/apps/v1/replicasets/team-a/mc-abc/"' in body
    fragment = as_role("viewer", ["team-a"]).get(f"/resources/{res.pk}/?_live=tree").json()["fragments"]["tree"]
    assert "ImagePullBackOff" in fragment


def test_the_detail_page_says_when_the_api_does_not_answer(as_role, monkeypatch, builtin_kinds_only):
    ht.cache_clear()
    monkeypatch.setattr(apiclient, "get_api_client", lambda *_: object())
    monkeypatch.setattr(kube, "list_objects", lambda *a, **k: (_ for _ in ()).throw(OSError("refused")))
    res = f.resource("mc", "team-a")
    response = as_role("viewer").get(f"/resources/{res.pk}/")
    assert response.status_code == 200 and "Children not read: the Kubernetes API did not answer" in \
        response.content.decode()


def test_the_pod_page_shows_its_yaml_events_and_owner_chain(as_role, cluster):
    res = f.resource("mc", "team-a")
    fake = cluster(res.uid)
    response = as_role("viewer", ["team-a"]).get(POD_PATH.format(ns="team-a"))
    body = response.content.decode()
    assert response.status_code == 200 and "Content-Security-Policy" in response
    assert "image: memcached:broken" in body and "managedFields" not in body.split('id="object-yaml"')[1]
    assert "Failed to pull image memcached:broken" in body
    assert 'href="/objects/apps/v1/replicasets/team-a/mc-abc/"' in body
    assert 'href="/objects/apps/v1/deployments/team-a/mc/"' in body
    assert f'href="/resources/{res.pk}/"' in body
    assert ("events", "involvedObject.uid=p1") in fake.lists


def test_an_object_outside_the_users_namespaces_is_a_404(as_role, cluster):
    res = f.resource("mc", "team-a")
    fake = cluster(res.uid)
    assert as_role("viewer", ["team-b"]).get(POD_PATH.format(ns="team-a")).status_code == 404
    assert as_role(None).get(POD_PATH.format(ns="team-a")).status_code == 403  # no role: as the resource pages
    assert fake.gets == []  # refused before any read


def test_a_secret_or_an_unknown_kind_is_a_404(as_role, cluster):
    fake = cluster(f.resource("mc", "team-a").uid)
    admin = as_role("admin")
    assert admin.get("/objects/core/v1/secrets/team-a/token/").status_code == 404
    assert admin.get("/objects/core/v1/configmaps/team-a/x/").status_code == 404
    assert admin.get("/objects/apps/v1/deployments/mc/").status_code == 404  # namespaced kind without namespace
    assert admin.get("/objects/core/v1/pods/team-a/gone/").status_code == 404
    assert fake.gets == [("pods", "gone")]


def test_the_object_page_says_when_the_api_does_not_answer(as_role, monkeypatch, builtin_kinds_only):
    monkeypatch.setattr(apiclient, "get_api_client", lambda *_: object())
    monkeypatch.setattr(kube, "get_object", lambda *a, **k: (_ for _ in ()).throw(OSError("refused")))
    response = as_role("viewer").get(POD_PATH.format(ns="team-a"))
    assert response.status_code == 503 and "The Kubernetes API did not answer" in response.content.decode()


def test_the_tree_api_answers_the_nested_tree_within_the_callers_namespaces(as_role, cluster):
    res = f.resource("mc", "team-a")
    cluster(res.uid)
    body = as_role("viewer", ["team-a"]).get(f"/api/v1/resources/{res.pk}/tree").json()
    deployment = body["root"]["children"][0]
    pod = deployment["children"][0]["children"][0]
    assert (body["error"], body["root"]["kind"], deployment["kind"], pod["name"]) == ("", "Memcached", "Deployment",
                                                                                       "mc-abc-x")
    assert pod["health"] == {"status": "Failed", "message": "Back-off pulling image memcached:broken",
                             "ready": "0/1 ready", "reason": "ImagePullBackOff"}
    assert as_role("viewer", ["team-b"]).get(f"/api/v1/resources/{res.pk}/tree").status_code == 404


def test_an_object_of_another_cluster_is_read_through_that_clusters_client(as_role, cluster, monkeypatch):
    f.cluster("prod")
    res = f.resource("mc", "team-a", cluster="prod")
    fake = cluster(res.uid)
    asked = []
    monkeypatch.setattr(apiclient, "get_api_client", lambda *a: asked.append(a) or object())
    viewer = as_role("viewer", ["prod/team-a"])
    detail = viewer.get(f"/resources/{res.pk}/").content.decode()
    assert f'href="{POD_PATH.format(ns="team-a")}?cluster=prod"' in detail  # the tree's links name the cluster
    body = viewer.get(POD_PATH.format(ns="team-a") + "?cluster=prod").content.decode()
    assert 'id="object-cluster">cluster prod<' in body and ("prod",) in asked
    assert 'href="/objects/apps/v1/replicasets/team-a/mc-abc/?cluster=prod"' in body
    fake.gets.clear()
    assert viewer.get(POD_PATH.format(ns="team-a")).status_code == 404  # the default cluster: not theirs
    assert viewer.get(POD_PATH.format(ns="team-a") + "?cluster=nope").status_code == 404
    assert fake.gets == []  # refused before any read
    # the same object asked in the default cluster: its owner chain ends at a resource of prod, so no
    assert as_role("admin").get(POD_PATH.format(ns="team-a")).status_code == 404
