"""Actions: manual reconcile (202, the request, the annotation, the enqueue), idempotency, bulk with partial
failures, queue controls; the role × action matrix in and out of the user's namespaces; the audit row of
every action, allowed or refused (401/403/429); throttling; error bodies."""

from __future__ import annotations

import json
import uuid

import pytest
from rest_framework.test import APIClient

from reconcilers.core.meta import RECONCILE_REQUESTED_AT as ANNOTATION
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube
from reconcilers.models import ActionRecord, ReconcileRequest
from tests.opsconsole.api import factories as f
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = pytest.mark.django_db(transaction=True)
GADGET_KIND = {"group": GADGET.group, "version": GADGET.version, "plural": GADGET.plural, "kind": GADGET.kind}
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)


class Cluster:
    """Two namespaces (`inside`, `outside`) with gadgets in kubesim, mirrored as Resource rows."""

    def __init__(self, kapi) -> None:
        self.kapi = kapi
        tag = uuid.uuid4().hex[:6]
        self.inside, self.outside = f"in-{tag}", f"out-{tag}"
        for ns in (self.inside, self.outside):
            kube.create_object(kapi, NAMESPACE, {"metadata": {"name": ns}})

    def gadget(self, namespace: str, name: str, **fields):
        obj = kube.create_object(self.kapi, GADGET, gadget(namespace, name, mode="ok"))
        return f.resource(name, namespace, kind=GADGET_KIND, uid=obj["metadata"]["uid"], **fields)

    def annotation(self, res) -> str | None:
        obj = kube.get_object(self.kapi, GADGET, res.namespace, res.name)
        return (obj["metadata"].get("annotations") or {}).get(ANNOTATION)


@pytest.fixture
def cluster(kapi, queue, reconcilers) -> Cluster:
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    return Cluster(kapi)


def last_record() -> ActionRecord:
    return ActionRecord.objects.order_by("-id").first()


def test_a_manual_reconcile_answers_202_with_the_request_annotates_and_enqueues(cluster, operator, queue):
    res = cluster.gadget(cluster.inside, "g1")
    response = operator.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "cache stale"}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["state"], body["reason"], body["actor"]) == ("requested", "cache stale",
                                                             f"user:{operator.user.username}")
    assert cluster.annotation(res) == body["token"]
    assert queue.sent.keys == [res.key]
    record = last_record()
    assert (record.action, record.outcome, record.status_code, record.reason, record.target) == (
        "resource.reconcile", "allowed", 202, "cache stale", res.key)
    assert record.detail["request_id"] == body["id"]


def test_the_reason_is_required_and_the_400_names_it(cluster, operator):
    res = cluster.gadget(cluster.inside, "g1")
    response = operator.post(f"/api/v1/resources/{res.pk}/reconcile", {}, format="json")
    assert response.status_code == 400
    assert response.json()["fields"] == {"reason": ["This field is required."]}
    assert ReconcileRequest.objects.count() == 0
    assert (last_record().outcome, last_record().status_code) == ("rejected", 400)


def test_an_idempotency_key_prevents_doubles_and_conflicts_on_another_object(cluster, operator, queue):
    a, b = cluster.gadget(cluster.inside, "a"), cluster.gadget(cluster.inside, "b")
    headers = {"HTTP_IDEMPOTENCY_KEY": "deploy-42"}
    first = operator.post(f"/api/v1/resources/{a.pk}/reconcile", {"reason": "r"}, format="json", **headers)
    again = operator.post(f"/api/v1/resources/{a.pk}/reconcile", {"reason": "r"}, format="json", **headers)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"] and ReconcileRequest.objects.count() == 1
    assert queue.sent.keys == [a.key]
    other = operator.post(f"/api/v1/resources/{b.pk}/reconcile", {"reason": "r"}, format="json", **headers)
    assert other.status_code == 409 and other.json()["code"] == "conflict"
    bad = operator.post(f"/api/v1/resources/{a.pk}/reconcile", {"reason": "r"}, format="json",
                        HTTP_IDEMPOTENCY_KEY="has space")
    assert bad.status_code == 400 and "Idempotency-Key" in bad.json()["fields"]


def test_a_resource_gone_from_the_cluster_is_a_404(cluster, operator):
    res = f.resource("ghost", cluster.inside, kind=GADGET_KIND)
    response = operator.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "r"}, format="json")
    assert response.status_code == 404 and response.json()["status"] == 404


def test_bulk_reconcile_makes_one_request_per_match_and_reports_partial_failures(cluster, operator, queue):
    a = cluster.gadget(cluster.inside, "a", labels={"tier": "cache"})
    b = cluster.gadget(cluster.inside, "b", labels={"tier": "cache"})
    ghost = f.resource("ghost", cluster.inside, kind=GADGET_KIND, labels={"tier": "cache"})
    cluster.gadget(cluster.inside, "c", labels={"tier": "web"})
    response = operator.post("/api/v1/resources/reconcile",
                             {"kind": "Gadget", "selector": "tier=cache", "reason": "rollout"}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["matched"] == 3
    assert sorted(r["key"] for r in body["requested"]) == sorted([a.key, b.key])
    assert [(x["key"], x["code"]) for x in body["failed"]] == [(ghost.key, "not_found")]
    assert ReconcileRequest.objects.filter(reason="rollout").count() == 2
    assert sorted(queue.sent.keys) == sorted([a.key, b.key])
    assert last_record().detail["matched"] == 3


def test_bulk_reconcile_is_idempotent_and_needs_a_selector_or_phase(cluster, operator):
    cluster.gadget(cluster.inside, "a", phase="Failed")
    body = {"kind": "Gadget", "phase": "Failed", "reason": "retry failed"}
    first = operator.post("/api/v1/resources/reconcile", body, format="json", HTTP_IDEMPOTENCY_KEY="k")
    again = operator.post("/api/v1/resources/reconcile", body, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert [r["id"] for r in first.json()["requested"]] == [r["id"] for r in again.json()["requested"]]
    assert ReconcileRequest.objects.count() == 1
    response = operator.post("/api/v1/resources/reconcile", {"kind": "Gadget", "reason": "x"}, format="json")
    assert response.status_code == 400 and "selector" in response.json()["fields"]


def test_queue_controls_retry_now_and_reset_backoff(cluster, admin, queue):
    key = GADGET.request(cluster.inside, "a").key()
    queue.add_rate_limited(key)
    queue.add_rate_limited(key)
    response = admin.post("/api/v1/queue/reset-backoff", {"key": key}, format="json")
    assert response.json() == {"key": key, "changed": True, "failures_before": 2}
    assert queue.failures(key) == 0
    response = admin.post("/api/v1/queue/retry-now", {"key": key, "reason": "stuck"}, format="json")
    assert response.status_code == 200 and response.json()["changed"] is True
    assert queue.sent.keys == [key]
    assert admin.post("/api/v1/queue/retry-now", {"key": "nonsense"}, format="json").json()["fields"]["key"]
    assert (last_record().action, last_record().outcome) == ("queue.retry_now", "rejected")


ACTIONS = ["reconcile", "bulk", "retry_now", "reset_backoff"]
ALLOWED = {
    None: set(),
    "viewer": set(),
    "operator": {"reconcile", "bulk"},
    "admin": {"reconcile", "bulk", "retry_now", "reset_backoff"},
}


def do(client: APIClient, action: str, cluster: Cluster, namespace: str):
    res = cluster.gadget(namespace, f"g-{uuid.uuid4().hex[:6]}", labels={"m": "x"})
    if action == "reconcile":
        return client.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "matrix"}, format="json")
    if action == "bulk":
        return client.post("/api/v1/resources/reconcile", {"kind": "Gadget", "selector": "m=x", "namespace": namespace,
                                                           "reason": "matrix"}, format="json")
    path = "/api/v1/queue/retry-now" if action == "retry_now" else "/api/v1/queue/reset-backoff"
    return client.post(path, {"key": res.key, "reason": "matrix"}, format="json")


@pytest.mark.parametrize("role", [None, "viewer", "operator", "admin"])
@pytest.mark.parametrize("token", [False, True], ids=["session", "token"])
def test_the_role_by_action_matrix_in_and_out_of_the_users_namespaces(cluster, as_user, role, token):
    client = as_user(role, [cluster.inside], token=token)
    for action in ACTIONS:
        for namespace, inside in ((cluster.inside, True), (cluster.outside, False)):
            response = do(client, action, cluster, namespace)
            allowed = action in ALLOWED[role] and inside
            # by id outside one's namespaces: 404, as an id that does not exist (an id tells no namespace)
            hidden = action == "reconcile" and action in ALLOWED[role] and not inside
            expected = {200, 202} if allowed else {404} if hidden else {403}
            assert response.status_code in expected, (role, action, namespace, response.content)
            record = last_record()
            assert record.actor == client.user.username
            assert record.auth == ("token" if token else "session")
            assert record.outcome == ("allowed" if allowed else "rejected" if hidden else "refused")
            assert record.reason == "matrix"
    if role is not None:
        assert client.get("/api/v1/resources").status_code == 200
    else:
        assert client.get("/api/v1/resources").status_code == 403


def test_a_user_limited_to_namespaces_sees_only_them_in_every_list(cluster, as_user):
    client = as_user("viewer", [cluster.inside])
    mine = cluster.gadget(cluster.inside, "mine")
    theirs = cluster.gadget(cluster.outside, "theirs")
    t_mine, t_theirs = f.transition(mine, "Pending"), f.transition(theirs, "Pending")
    ReconcileRequest.objects.create(resource=theirs, key=theirs.key, token="t", actor="user:x")
    assert [r["id"] for r in client.get("/api/v1/resources").json()["results"]] == [mine.pk]
    assert [r["id"] for r in client.get("/api/v1/transitions").json()["results"]] == [t_mine.pk]
    assert client.get(f"/api/v1/resources/{theirs.pk}").status_code == 404
    assert client.get(f"/api/v1/resources/{theirs.pk}/transitions").status_code == 404
    assert client.get("/api/v1/reconcile-requests").json() == []
    rows = b"".join(client.get("/api/v1/transitions.jsonl").streaming_content).decode().splitlines()
    assert [json.loads(row)["id"] for row in rows] == [t_mine.pk] and t_theirs.pk != t_mine.pk
    assert client.get("/api/v1/me").json()["namespaces"] == [cluster.inside]


def test_an_unauthenticated_action_is_a_401_and_is_audited(cluster):
    res = cluster.gadget(cluster.inside, "g")
    client = APIClient()
    response = client.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "anon"}, format="json")
    assert response.status_code == 401 and response.json()["code"] == "not_authenticated"
    record = last_record()
    assert (record.actor, record.outcome, record.status_code, record.reason) == ("", "refused", 401, "anon")
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Bearer oc_not-a-real-token")
    response = bad.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "bad token"}, format="json")
    assert response.status_code == 401 and last_record().reason == "bad token"
    assert ReconcileRequest.objects.count() == 0


def test_actions_are_throttled_per_user_with_retry_after_and_audited(cluster, as_user, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"actions": "2/min"}}
    res = cluster.gadget(cluster.inside, "g")
    client, other = as_user("operator"), as_user("operator")
    codes = [client.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "again"}, format="json").status_code
             for _ in range(3)]
    assert codes == [202, 202, 429]
    response = client.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "again"}, format="json")
    assert response.status_code == 429 and int(response["Retry-After"]) >= 1
    assert response.json()["retry_after"] >= 1
    assert (last_record().outcome, last_record().status_code) == ("refused", 429)
    assert other.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "x"}, format="json").status_code == 202


def test_a_body_that_is_not_json_or_not_an_object_is_a_400(cluster, operator):
    res = cluster.gadget(cluster.inside, "g")
    response = operator.post(f"/api/v1/resources/{res.pk}/reconcile", "{nope", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "parse_error"
    response = operator.post(f"/api/v1/resources/{res.pk}/reconcile", [1, 2], format="json")
    assert response.status_code == 400 and response.json()["fields"]


def test_the_action_record_is_listed_for_admins_only(cluster, admin, viewer):
    viewer.post("/api/v1/queue/retry-now", {"key": "a/v1/b/c/d"}, format="json")
    body = admin.get("/api/v1/actions", {"outcome": "refused"}).json()
    assert [(r["action"], r["actor"]) for r in body["results"]] == [("queue.retry_now", viewer.user.username)]
    assert viewer.get("/api/v1/actions").status_code == 403
