"""The role × action matrix, console and API, on a real kubesim: for each identity — nobody, a user without a
role, viewer, operator and admin (each granted only the namespace `inside`), a superuser (no limit) — every
action: read the overview, list, detail (in and out of the grant), audit log, queue; Reconcile now and bulk
Reconcile (console form and API); the queue controls; the chain verification (admins); API tokens (own, for another
user inside the grant and for the superuser; revoke another's); the action record; Django's admin pages.
Each answer is exactly the designed one, every refused action is in the action record as refused with who and
how, and nothing refused left a trace (no request, no annotation, no enqueue, no token)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from opsconsole.accounts.models import ApiToken, NamespaceGrant
from opsconsole.accounts.tokens import token_create
from reconcilers.core.meta import RECONCILE_REQUESTED_AT as ANNOTATION
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube
from reconcilers.models import ActionRecord, ReconcileRequest
from tests.opsconsole.api import factories as f
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = pytest.mark.django_db(transaction=True)
GADGET_KIND = {"group": GADGET.group, "version": GADGET.version, "plural": GADGET.plural, "kind": GADGET.kind}
NAMESPACE = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)
RANK = {"anonymous": 0, "none": 0, "viewer": 1, "operator": 2, "admin": 3, "superuser": 3}
IDENTITIES = list(RANK)


class Cluster:
    """Two namespaces in kubesim, `inside` (the users' grant) and `outside`, a Gadget in each mirrored as a
    Resource row, a backing-off queue key in each."""

    def __init__(self, kapi, queue) -> None:
        self.kapi, self.queue = kapi, queue
        tag = uuid.uuid4().hex[:6]
        self.inside, self.outside = f"in-{tag}", f"out-{tag}"
        self.res = {}
        self.keys = {}
        for where, ns in (("in", self.inside), ("out", self.outside)):
            kube.create_object(kapi, NAMESPACE, {"metadata": {"name": ns}})
            obj = kube.create_object(kapi, GADGET, gadget(ns, f"g-{where}", mode="ok"))
            self.res[where] = f.resource(f"g-{where}", ns, kind=GADGET_KIND, uid=obj["metadata"]["uid"])
            self.keys[where] = GADGET.request(ns, f"q-{where}").key()
            queue.add_rate_limited(self.keys[where])

    def annotated(self, where: str) -> bool:
        obj = kube.get_object(self.kapi, GADGET, self.res[where].namespace, self.res[where].name)
        return ANNOTATION in ((obj["metadata"].get("annotations")) or {})


@pytest.fixture
def cluster(kapi, queue, reconcilers, settings):
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"actions": "100000/min"}}
    return Cluster(kapi, queue)


def make_user(identity: str, cluster: Cluster) -> User | None:
    """The identity's user: granted only `inside` (the superuser: no limit); None for nobody."""
    name = f"{identity}-{uuid.uuid4().hex[:6]}"
    if identity == "anonymous":
        return None
    if identity == "superuser":
        return User.objects.create_superuser(name, password="pw")
    return f.user(name, None if identity == "none" else identity, [cluster.inside])


@dataclass
class Expect:
    """What one identity may do: derived from its rank and whether its grant limits it."""

    identity: str

    @property
    def rank(self) -> int:
        return RANK[self.identity]

    @property
    def unlimited(self) -> bool:
        return self.identity == "superuser"

    def may(self, need: int, where: str = "in") -> bool:
        return self.rank >= need and (where == "in" or self.unlimited)


def records_since(first_id: int) -> list[ActionRecord]:
    return list(ActionRecord.objects.filter(id__gt=first_id).order_by("id"))


def last_id() -> int:
    return ActionRecord.objects.order_by("-id").values_list("id", flat=True).first() or 0


def check_record(before: int, action: str, user: User | None, allowed: bool, auth: str,
                 refused: str = "refused") -> ActionRecord:
    """Exactly one record since `before`: this action, this actor, allowed or refused (`refused`: the outcome of
    a refusal, `rejected` for a 404)."""
    (record,) = records_since(before)
    assert record.action == action
    assert record.actor == (user.username if user else "")
    assert record.outcome == ("allowed" if allowed else refused), (action, record.status_code, record.detail)
    assert record.auth == (auth if user else "")
    return record


# -- the console ----------------------------------------------------------------------------------------------


def console_client(user: User | None) -> Client:
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    client.get("/login/")  # the CSRF cookie, as a browser gets it from any page with a form
    return client


def console_post(client: Client, path: str, data: dict):
    return client.post(path, {**data, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})


@pytest.mark.parametrize("identity", IDENTITIES)
def test_the_console_allows_and_refuses_exactly_as_designed(cluster, identity, monkeypatch):
    from reconcilers.services.selectors import liveness

    monkeypatch.setattr(liveness, "workers_alive", lambda **_: {"workers": ["celery@test"], "error": ""})
    user = make_user(identity, cluster)
    client = console_client(user)
    want = Expect(identity)
    res_in, res_out = cluster.res["in"], cluster.res["out"]

    # reads: anonymous → the login page; no role → 403; a role → the page, with only what the grant shows
    for path in ("/", "/resources/", "/audit/", "/queue/", f"/resources/{res_in.pk}/", f"/traces/{'a' * 32}/"):
        response = client.get(path)
        if identity == "anonymous":
            assert response.status_code == 302 and response["Location"].startswith("/login/"), path
        elif path.startswith("/traces/") and want.may(1) and not want.unlimited:
            assert response.status_code == 404, (identity, path)  # a trace about no resource: every namespace only
        else:
            assert response.status_code == (200 if want.may(1) else 403), (identity, path)
    detail_out = client.get(f"/resources/{res_out.pk}/").status_code
    assert detail_out == {0: 302 if identity == "anonymous" else 403}.get(want.rank, 200 if want.unlimited else 404)
    if want.may(1):
        listing = client.get("/resources/").content.decode()
        assert ">g-in</a>" in listing and (">g-out</a>" in listing) == want.unlimited

    # Reconcile now, in and out of the grant
    for where in ("in", "out"):
        before, res = last_id(), cluster.res[where]
        response = console_post(client, f"/resources/{res.pk}/reconcile", {"reason": "matrix"})
        allowed = want.may(2, where)
        if identity == "anonymous":
            assert response.status_code == 302 and response["Location"].startswith("/login/")
            assert records_since(before) == []  # nobody: sent to log in, nothing attempted
        else:
            # by id outside the grant: 404, as an id that does not exist (an id does not tell a namespace)
            hidden = want.may(2) and not allowed
            assert response.status_code == (302 if allowed else 404 if hidden else 403), (
                identity, where, response.content[:300])
            record = check_record(before, "resource.reconcile", user, allowed, "session",
                                  "rejected" if hidden else "refused")
            visible = where == "in" or want.unlimited  # an id one may not see is recorded as the id only
            assert record.reason == "matrix" and record.target == (res.key if visible else f"resource:{res.pk}")
        assert cluster.annotated(where) == allowed
        assert ReconcileRequest.objects.filter(resource=res).exists() == allowed

    # bulk Reconcile of both: only what the grant shows is requested
    before = last_id()
    response = console_post(client, "/resources/reconcile", {"ids": [res_in.pk, res_out.pk], "reason": "bulk"})
    if identity != "anonymous":
        record = check_record(before, "resource.reconcile_bulk", user, want.may(2), "session")
        assert response.status_code == (302 if want.may(2) else 403)
        if want.may(2):
            assert record.detail["matched"] == (2 if want.unlimited else 1)
    assert ReconcileRequest.objects.filter(reason="bulk").count() == (
        (2 if want.unlimited else 1) if want.may(2) else 0)

    # queue controls, in and out of the grant
    for path, action in (("/queue/retry-now", "queue.retry_now"), ("/queue/reset-backoff", "queue.reset_backoff")):
        for where in ("in", "out"):
            before = last_id()
            response = console_post(client, path, {"key": cluster.keys[where]})
            allowed = want.may(3, where)
            if identity != "anonymous":
                assert response.status_code == (302 if allowed else 403), (identity, path, where)
                check_record(before, action, user, allowed, "session")
    assert cluster.queue.failures(cluster.keys["in"]) == (0 if want.may(3) else 1)
    assert cluster.queue.failures(cluster.keys["out"]) == (0 if want.unlimited else 1)

    # verifying every chain (a full read of the record): admins only, recorded
    before = last_id()
    response = console_post(client, "/audit/verify", {})
    if identity != "anonymous":
        assert response.status_code == (302 if want.may(3) else 403), identity
        check_record(before, "audit.verify", user, want.may(3), "session")

    # Django's admin: staff only (the superuser); everyone else is sent to its login
    for path in ("/admin/", "/admin/accounts/apitoken/", "/admin/reconcilers/actionrecord/",
                 "/admin/accounts/namespacegrant/add/", "/admin/auth/user/"):
        response = client.get(path)
        if identity == "superuser":
            assert response.status_code == 200, path
        else:
            assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), (identity, path)


# -- the API --------------------------------------------------------------------------------------------------


def api_client(user: User | None, auth: str) -> APIClient:
    client = APIClient()
    if user is not None and auth == "token":
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user, name='matrix').secret}")
    elif user is not None:
        client.force_login(user)
    return client


@pytest.mark.parametrize("auth", ["session", "token"])
@pytest.mark.parametrize("identity", IDENTITIES)
def test_the_api_allows_and_refuses_exactly_as_designed(cluster, identity, auth):
    user = make_user(identity, cluster)
    client = api_client(user, auth)
    want = Expect(identity)
    refused_read = 401 if identity == "anonymous" else 403
    res_in, res_out = cluster.res["in"], cluster.res["out"]

    for path in ("/api/v1/resources", f"/api/v1/resources/{res_in.pk}", "/api/v1/transitions", "/api/v1/queue",
                 "/api/v1/kinds", "/api/v1/reconcile-requests", "/api/v1/me", "/api/v1/tokens"):
        assert client.get(path).status_code == (200 if want.may(1) else refused_read), (identity, path)
    assert client.get(f"/api/v1/resources/{res_out.pk}").status_code == (
        refused_read if not want.may(1) else 200 if want.unlimited else 404)
    if want.may(1):
        names = {r["name"] for r in client.get("/api/v1/resources").json()["results"]}
        assert names == ({"g-in", "g-out"} if want.unlimited else {"g-in"})
    assert client.get("/api/v1/actions").status_code == (200 if want.may(3) else refused_read)

    for where in ("in", "out"):
        before, res = last_id(), cluster.res[where]
        response = client.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "matrix"}, format="json")
        allowed = want.may(2, where)
        hidden = want.may(2) and not allowed  # by id outside the grant: 404, naming no namespace
        assert response.status_code == (202 if allowed else refused_read if not want.may(2) else
                                         404 if hidden else 403), (identity, where, response.content)
        assert not hidden or res.namespace not in response.content.decode()
        check_record(before, "resource.reconcile", user, allowed, auth, "rejected" if hidden else "refused")
        assert cluster.annotated(where) == allowed
        for path, action in (("/api/v1/queue/retry-now", "queue.retry_now"),
                             ("/api/v1/queue/reset-backoff", "queue.reset_backoff")):
            before = last_id()
            response = client.post(path, {"key": cluster.keys[where], "reason": "matrix"}, format="json")
            allowed = want.may(3, where)
            assert response.status_code == (200 if allowed else refused_read if not want.may(3) else 403)
            check_record(before, action, user, allowed, auth)

    # tokens: one's own; for a viewer inside the grant; for the (unlimited) superuser; revoking another's
    colleague = f.user(f"colleague-{uuid.uuid4().hex[:6]}", "viewer", [cluster.inside])
    root = User.objects.create_superuser(f"root-{uuid.uuid4().hex[:6]}", password="pw")
    tokens_before = ApiToken.objects.count()
    for target, allowed in ((None, want.may(1)), (colleague, want.may(3)),
                            (root, want.rank >= 3 and want.unlimited)):
        before = last_id()
        body = {"name": "matrix-made"} | ({"username": target.username} if target else {})
        response = client.post("/api/v1/tokens", body, format="json")
        expected = 201 if allowed else refused_read if not want.may(1) else 403
        assert response.status_code == expected, (identity, target, response.content)
        check_record(before, "token.create", user, allowed, auth)
    made = ApiToken.objects.count() - tokens_before
    assert made == sum([want.may(1), want.may(3), want.rank >= 3 and want.unlimited])
    assert not ApiToken.objects.filter(user=root, name="matrix-made").exists() or want.unlimited

    if want.may(3):  # an admin lists the tokens of the users it covers only
        listed = {t["username"] for t in client.get("/api/v1/tokens", {"all": "true"}).json()}
        assert colleague.username in listed and (root.username in listed) == want.unlimited
        by_name = client.get("/api/v1/tokens", {"username": root.username}).json()
        assert bool(by_name) == want.unlimited

    for owner, allowed in ((colleague, want.may(3)), (root, want.rank >= 3 and want.unlimited)):
        theirs = token_create(owner, name="theirs").token
        before = last_id()
        response = client.delete(f"/api/v1/tokens/{theirs.pk}")
        # another user's token does not exist for whoever may not act on it (404, recorded as rejected)
        expected = 204 if allowed else refused_read if not want.may(1) else 404
        assert response.status_code == expected, (identity, owner, response.content)
        (record,) = records_since(before)
        assert record.action == "token.revoke" and record.status_code == expected
        theirs.refresh_from_db()
        assert (theirs.revoked_at is not None) == allowed


def test_a_grant_change_applies_to_the_next_request(cluster):
    user = f.user(f"moving-{uuid.uuid4().hex[:6]}", "operator", [cluster.outside])
    client = api_client(user, "token")
    res = cluster.res["in"]
    assert client.get(f"/api/v1/resources/{res.pk}").status_code == 404
    NamespaceGrant.objects.create(user=user, namespace=cluster.inside)
    assert client.get(f"/api/v1/resources/{res.pk}").status_code == 200
    response = client.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "now mine"}, format="json")
    assert response.status_code == 202
    user.groups.clear()
    assert client.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "r"}, format="json").status_code == 403
    assert ActionRecord.objects.order_by("-id").first().outcome == "refused"
