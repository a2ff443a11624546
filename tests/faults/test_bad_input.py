"""Bad input through the real engine (kubesim, two Celery workers, the controller, Redis, the database):
- CRs whose spec passes the CRD schema but means nothing (Memcached images no kubelet would pull, among them one
  of 40 000 characters; Tenants with negative, malformed or unnamed quotas, or a name too long for their
  namespace) reach Failed with a reason and a message naming the field, record Failed once — a manual
  reconcile and an event later still once — are not retried in a loop, and recover when the spec is fixed;
- CRs carrying markup, emoji, right-to-left text and control characters (annotations, spec, and so the
  messages their reconciles write) converge without a worker error; the console shows them escaped, the API
  returns them intact as JSON;
- a spec of about 1 MiB in 4 000 fields (the API server keeps objects up to 1.5 MiB) converges and is shown
  and served whole."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from django.test import Client
from rest_framework.test import APIClient

from kubesim.testing import wait_for
from opsconsole.accounts.tokens import token_create
from reconcilers.core.meta import RECONCILE_REQUESTED_AT as ANNOTATION
from reconcilers.engine import kube
from reconcilers.kinds.memcached import DEPLOYMENT, MEMCACHED
from reconcilers.kinds.tenant import NAMESPACE, TENANT
from reconcilers.models import ReconcileRun, Resource, Transition
from tests.faults.conftest import phases, with_retries
from tests.opsconsole.api import factories as f
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

HUGE_IMAGE = "memcached:" + "a" * 40_000


def memcached(namespace: str, name: str, **spec) -> dict:
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"size": 1, **spec}}


def tenant(name: str, **spec) -> dict:
    return {"apiVersion": "tenancy.example.com/v1alpha1", "kind": "Tenant", "metadata": {"name": name},
            "spec": {"admins": ["alice"], **spec}}


def recorded(uid: str, phase: str) -> bool:
    return Resource.objects.filter(uid=uid, phase=phase).exists()


def failed_once(uid: str) -> bool:
    return Transition.objects.filter(resource_uid=uid, to_phase="Failed").count() == 1


def annotate(api, kind, namespace: str | None, name: str, token: str) -> None:
    kube.patch_object(api, kind, namespace, name, {"metadata": {"annotations": {ANNOTATION: token}}})


def handled(api, kind, namespace: str | None, name: str, token: str) -> bool:
    obj = kube.get_object(api, kind, namespace, name) or {}
    return (obj.get("status") or {}).get("lastHandledReconcileAt") == token


INVALID_MEMCACHEDS = {
    "upper-case": "Memcached:Latest",
    "space": "memcached: 1.6",
    "markup": "<script>alert(1)</script>",
    "unicode": "mémcached:🔥",
    "huge": HUGE_IMAGE,
}


def test_memcacheds_with_meaningless_specs_fail_once_with_a_reason_and_recover_when_fixed(faults, kapi, namespace):
    started = time.monotonic()
    uids = {name: kube.create_object(kapi, MEMCACHED, memcached(namespace, name, image=image))["metadata"]["uid"]
            for name, image in INVALID_MEMCACHEDS.items()}
    wait_for(lambda: all(recorded(uid, "Failed") for uid in uids.values()), timeout=60, interval=0.2)
    to_failed = time.monotonic() - started
    for name, uid in uids.items():
        status = kube.get_object(kapi, MEMCACHED, namespace, name)["status"]
        assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec"), name
        assert status["message"].startswith("spec.image: not a valid image reference (got "), name
        stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
        assert (stalled["status"], stalled["reason"]) == ("True", "InvalidSpec")
        assert len(stalled["message"]) <= 32768  # metav1.Condition's limit, which the API server enforces
        row = Transition.objects.get(resource_uid=uid, to_phase="Failed")
        assert row.reason == "InvalidSpec" and "spec.image" in row.message
        assert kube.get_object(kapi, DEPLOYMENT, namespace, name) is None  # nothing was created
    # the whole message is kept in the database even when the condition's copy is cut
    assert INVALID_MEMCACHEDS["huge"] in Resource.objects.get(uid=uids["huge"]).message

    time.sleep(1.5)  # a retry loop (50 ms backoff) would make many runs by now
    for name, uid in uids.items():
        runs = ReconcileRun.objects.filter(resource__uid=uid)
        assert runs.count() <= 2, (name, runs.count())
        assert set(runs.values_list("error_class", flat=True)) == {"PermanentError"}

    # asked again (a manual reconcile) and poked (a label change does not count, an annotation does): still
    # Failed, recorded once
    for name in uids:
        annotate(kapi, MEMCACHED, namespace, name, f"again-{name}")
    wait_for(lambda: all(handled(kapi, MEMCACHED, namespace, n, f"again-{n}") for n in uids), timeout=30,
             interval=0.2)
    for name, uid in uids.items():
        assert failed_once(uid), name
        assert phases(uid) in ([("", "Failed")], [("", "Pending"), ("Pending", "Failed")]), (name, phases(uid))

    kube.patch_object(kapi, MEMCACHED, namespace, "upper-case", {"spec": {"image": "memcached:1.6.26-alpine"}})
    wait_for(lambda: recorded(uids["upper-case"], "Running"), timeout=30, interval=0.2)
    assert phases(uids["upper-case"])[-2:] == [("Failed", "Pending"), ("Pending", "Running")]
    print(f"\nBAD-INPUT invalid-memcached: {len(uids)} schema-valid, meaningless specs Failed (InvalidSpec) in "
          f"{to_failed:.1f} s, one Failed each after a manual reconcile; the fixed one Running")


def test_tenants_with_invalid_quotas_or_names_fail_once_with_a_reason_and_create_nothing(faults, kapi):
    tag = uuid.uuid4().hex[:6]
    cases = {
        f"negative-{tag}": ({"quota": {"cpu": "-1"}}, "InvalidQuota", "must not be negative"),
        f"malformed-{tag}": ({"quota": {"memory": "1.5.5Gi"}}, "InvalidQuota", "is not a quantity"),
        f"unnamed-{tag}": ({"quota": {"CPU Cores": "2"}}, "InvalidQuota", "is not a resource name"),
        f"markup-{tag}": ({"quota": {"pods": "<img src=x onerror=alert(1)>"}}, "InvalidQuota", "is not a quantity"),
        f"{'long-' * 11}{tag}": ({}, "InvalidSpec", "a namespace name is at most 63"),  # tenant-<61>
    }
    uids = {name: kube.create_object(kapi, TENANT, tenant(name, **spec))["metadata"]["uid"]
            for name, (spec, _, _) in cases.items()}
    try:
        wait_for(lambda: all(recorded(uid, "Failed") for uid in uids.values()), timeout=60, interval=0.2)
        for name, (_, reason, words) in cases.items():
            status = kube.get_object(kapi, TENANT, None, name)["status"]
            assert (status["phase"], status["reason"]) == ("Failed", reason), name
            assert words in status["message"], (name, status["message"])
            assert kube.get_object(kapi, NAMESPACE, None, f"tenant-{name}") is None
            assert failed_once(uids[name])
        name = next(iter(cases))
        annotate(kapi, TENANT, None, name, "again")
        wait_for(lambda: handled(kapi, TENANT, None, name, "again"), timeout=30, interval=0.2)
        assert failed_once(uids[name])
    finally:
        for name in uids:
            kube.delete_object(kapi, TENANT, None, name)
        wait_for(lambda: all(kube.get_object(kapi, TENANT, None, n) is None for n in uids), timeout=60,
                 interval=0.2)
    for uid in uids.values():
        assert phases(uid)[-3:] == [("Pending", "Failed"), ("Failed", "Terminating"), ("Terminating", "Deleted")] or \
            phases(uid)[-3:] == [("", "Failed"), ("Failed", "Terminating"), ("Terminating", "Deleted")], phases(uid)
    print(f"\nBAD-INPUT invalid-tenant: {len(uids)} Tenants Failed with their reason, nothing created, deleted "
          f"through the finalizer")


EVIL = {
    "script": '<script>alert("x")</script>',
    "img": "<img src=x onerror=alert(1)>",
    "attr": "\" onmouseover=\"alert(1)\" x='",
    "emoji": "🔥👩‍💻🏳️‍🌈 ok",
    "rtl": "\u202eevil\u202c שלום עליכם مرحبا",
    "control": "bell\x07 esc\x1b[31m tab\t cr\r del\x7f zwj\u200d sep\u2028end",
}


def test_markup_and_odd_unicode_pass_through_escaped_in_the_console_and_intact_in_the_api(faults, kapi, namespace,
                                                                                         monkeypatch):
    from reconcilers.services.selectors import liveness

    monkeypatch.setattr(liveness, "workers_alive", lambda **_: {"workers": ["celery@test"], "error": ""})
    annotations = {f"example.com/{k}": v for k, v in EVIL.items()}
    uids = {}
    for key, text in EVIL.items():
        body = gadget(namespace, f"odd-{key}", mode=text, note={"text": text, text[:5]: [text]})
        body["metadata"]["annotations"] = annotations
        body["metadata"]["labels"] = {"odd": key}
        uids[key] = with_retries(lambda b=body: kube.create_object(kapi, GADGET, b))["metadata"]["uid"]
    wait_for(lambda: all(recorded(uid, "Running") for uid in uids.values()), timeout=60, interval=0.2)

    for key, uid in uids.items():
        res = Resource.objects.get(uid=uid)
        assert res.message == f"mode {EVIL[key]}" and res.spec["note"]["text"] == EVIL[key], key
        assert phases(uid) == [("", "Pending"), ("Pending", "Running")], key
        live = kube.get_object(kapi, GADGET, namespace, f"odd-{key}")
        assert live["metadata"]["annotations"] == annotations and live["status"]["message"] == f"mode {EVIL[key]}"
    keys = [GADGET.request(namespace, f"odd-{k}").key() for k in EVIL]
    assert not ReconcileRun.objects.filter(key__in=keys, result="error").exists()
    assert all(w.proc.poll() is None for w in faults.workers)  # no worker died of it

    admin = f.user(f"odd-admin-{uuid.uuid4().hex[:6]}", "admin")
    console = Client()
    console.force_login(admin)
    first = Resource.objects.get(uid=uids["script"])
    pages = ["/", "/resources/", "/resources/?selector=odd", f"/resources/{first.pk}/", "/audit/",
             "/?_live=recent", f"/resources/{first.pk}/?_live=head,timeline"]
    for uid in uids.values():
        pages.append(f"/resources/{Resource.objects.get(uid=uid).pk}/")
    for path in pages:
        response = console.get(path)
        assert response.status_code == 200, path
        html = response.content.decode()
        if response["Content-Type"] == "application/json":
            html = "".join(response.json()["fragments"].values())
        assert "<script>alert" not in html and "<img src=x" not in html, path
        assert 'onmouseover="alert' not in html, path
    detail = console.get(f"/resources/{first.pk}/").content.decode()
    assert "mode &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in detail  # the message, escaped
    emoji = console.get(f"/resources/{Resource.objects.get(uid=uids['emoji']).pk}/").content.decode()
    assert EVIL["emoji"] in emoji  # shown as it is, not mangled
    rtl = console.get(f"/resources/{Resource.objects.get(uid=uids['rtl']).pk}/").content.decode()
    assert "שלום עליכם مرحبا" in rtl

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(admin, name='odd').secret}")
    for key, uid in uids.items():
        pk = Resource.objects.get(uid=uid).pk
        response = api.get(f"/api/v1/resources/{pk}")
        assert response["Content-Type"] == "application/json"
        body = json.loads(response.content)
        assert body["message"] == f"mode {EVIL[key]}" and body["spec"]["note"]["text"] == EVIL[key], key
        assert body["status"]["message"] == f"mode {EVIL[key]}"
        assert body["spec"]["note"][EVIL[key][:5]] == [EVIL[key]]
        (last,) = [t for t in api.get(f"/api/v1/resources/{pk}/transitions").json()["results"]
                   if t["to_phase"] == "Running"]
        assert last["message"] == f"mode {EVIL[key]}"
    exported = b"".join(api.get("/api/v1/transitions.jsonl", {"namespace": namespace}).streaming_content)
    messages = {json.loads(line)["message"] for line in exported.decode().splitlines()}
    assert {f"mode {text}" for text in EVIL.values()} <= messages

    # a manual reconcile of an object whose annotations hold all of it: requested, handled, nothing doubled
    pk = Resource.objects.get(uid=uids["rtl"]).pk
    response = api.post(f"/api/v1/resources/{pk}/reconcile", {"reason": EVIL["rtl"] + EVIL["emoji"]},
                        format="json")
    assert response.status_code == 202, response.content
    wait_for(lambda: api.get(f"/api/v1/reconcile-requests/{response.json()['id']}").json()["state"] == "succeeded",
             timeout=30, interval=0.2)
    assert phases(uids["rtl"]) == [("", "Pending"), ("Pending", "Running")]
    print(f"\nBAD-INPUT odd-text: {len(EVIL)} CRs with markup, emoji, RTL and control characters Running; "
          f"{len(pages)} console pages escaped them; the API returned them intact")


def test_a_spec_of_a_mebibyte_in_4000_fields_converges_and_is_shown_and_served_whole(faults, kapi, namespace,
                                                                                    monkeypatch):
    from reconcilers.services.selectors import liveness

    monkeypatch.setattr(liveness, "workers_alive", lambda **_: {"workers": ["celery@test"], "error": ""})
    blob = {f"field-{i:04d}": f"{i:04d}:" + "v" * 250 for i in range(4000)}
    body = gadget(namespace, "huge", mode="ok", blob=blob)
    size = len(json.dumps(body))
    assert 1_000_000 < size < 1_500_000  # close to the 1.5 MiB an API server keeps
    started = time.monotonic()
    uid = with_retries(lambda: kube.create_object(kapi, GADGET, body))["metadata"]["uid"]
    wait_for(lambda: recorded(uid, "Running"), timeout=60, interval=0.2)
    converged = time.monotonic() - started
    res = Resource.objects.get(uid=uid)
    assert res.spec["blob"] == blob
    assert phases(uid) == [("", "Pending"), ("Pending", "Running")]

    admin = f.user(f"huge-admin-{uuid.uuid4().hex[:6]}", "admin")
    console = Client()
    console.force_login(admin)
    t0 = time.monotonic()
    page = console.get(f"/resources/{res.pk}/")
    shown = time.monotonic() - t0
    assert page.status_code == 200
    html = page.content.decode()
    assert "field-0000" in html and "field-3999" in html
    api = APIClient()
    api.force_authenticate(admin)
    t0 = time.monotonic()
    served = api.get(f"/api/v1/resources/{res.pk}")
    api_seconds = time.monotonic() - t0
    assert served.json()["spec"]["blob"] == blob
    assert api.get("/api/v1/resources", {"namespace": namespace}).status_code == 200
    kube.delete_object(kapi, GADGET, namespace, "huge")
    print(f"\nBAD-INPUT huge-spec: {size / 1e6:.2f} MB spec in 4000 fields Running in {converged:.1f} s; detail page "
          f"{len(html) / 1e6:.1f} MB in {shown:.2f} s; API detail in {api_seconds:.2f} s")
