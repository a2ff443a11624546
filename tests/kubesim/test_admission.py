"""kubesim's admission chain through the official client: validating webhooks refuse with kube-apiserver's message,
mutating webhooks patch (before the schema's validation and defaulting), over TLS with a CA kubesim verifies
(a bad CA refused), by URL or by Service, mutual TLS, failurePolicy Fail vs Ignore when the webhook is down or
slow, selectors, sideEffects and dry run, reinvocation, the AdmissionReview's contents, warnings."""

from __future__ import annotations

import base64
import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from kubesim.testing import KubesimHandle, running_kubesim
from tests.kubesim.conftest import WIDGET_CRD, raw
from tests.kubesim.webhooks import Pki, WebhookServer, make_pki, webhook_server

ADMISSION = "admissionregistration.k8s.io"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), ["hook.webhooks.svc"])


@pytest.fixture(scope="module")
def cluster(pki) -> Iterator[KubesimHandle]:
    with running_kubesim(webhook_client_cert=pki.client_cert, webhook_client_key=pki.client_key,
                         controllers=False) as k:
        client.ApiextensionsV1Api(k.api_client()).create_custom_resource_definition(WIDGET_CRD)
        yield k


@pytest.fixture(scope="module")
def api(cluster) -> client.ApiClient:
    return cluster.api_client()


@pytest.fixture(scope="module")
def hooks(pki) -> Iterator[WebhookServer]:
    with webhook_server(pki) as server:
        yield server


@pytest.fixture
def ns(api) -> str:
    name = f"a-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name, "labels": {"admission": "on"}}})
    return name


@pytest.fixture
def configurations(api) -> Iterator[list[tuple[str, str]]]:
    """Webhook configurations a test made, deleted afterwards: (plural, name)."""
    made: list[tuple[str, str]] = []
    yield made
    custom = client.CustomObjectsApi(api)
    for plural, name in made:
        custom.delete_cluster_custom_object(ADMISSION, "v1", plural, name)


def configure(api: client.ApiClient, made: list, kind: str, webhooks: list[dict[str, Any]]) -> str:
    plural = f"{kind.lower()}webhookconfigurations"
    name = f"{kind.lower()}-{uuid.uuid4().hex[:6]}"
    client.CustomObjectsApi(api).create_cluster_custom_object(ADMISSION, "v1", plural, {
        "apiVersion": f"{ADMISSION}/v1", "kind": f"{kind}WebhookConfiguration", "metadata": {"name": name},
        "webhooks": webhooks})
    made.append((plural, name))
    return name


def hook(name: str, client_config: dict[str, Any], ns: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "clientConfig": client_config,
        "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": ["example.com"], "apiVersions": ["v1"],
                   "resources": ["widgets"], "scope": "Namespaced"}],
        "timeoutSeconds": 5}
    if ns:
        body["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    body.update(extra)
    return body


def by_url(hooks: WebhookServer, pki: Pki, path: str) -> dict[str, Any]:
    return {"url": hooks.url(path), "caBundle": base64.b64encode(pki.ca_pem).decode()}


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def create(api: client.ApiClient, ns: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return client.CustomObjectsApi(api).create_namespaced_custom_object("example.com", "v1", ns, "widgets", body,
                                                                         **kw)


def refused(call: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(client.ApiException) as info:
        call()
    return info.value.status, json.loads(info.value.body)


def test_a_validating_webhook_refuses_with_the_apiservers_message_and_sees_the_request(
        api, hooks, pki, ns, configurations):
    path = f"/validate-{ns}"
    hooks.answers[path] = lambda req: (
        {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": "size 9 is too big"}}
        if (req.get("object") or {}).get("spec", {}).get("size") == 9 else {})
    configure(api, configurations, "Validating", [hook("size.example.com", by_url(hooks, pki, path), ns)])
    assert create(api, ns, widget("small", size=2))["spec"]["size"] == 2
    status, body = refused(lambda: create(api, ns, widget("big", size=9)))
    assert status == 403
    assert body["message"] == 'admission webhook "size.example.com" denied the request: size 9 is too big'
    review = hooks.for_path(path)[0]
    request = review["request"]
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    assert request["operation"] == "CREATE" and request["namespace"] == ns and request["name"] == "small"
    assert request["kind"] == {"group": "example.com", "version": "v1", "kind": "Widget"}
    assert request["resource"] == {"group": "example.com", "version": "v1", "resource": "widgets"}
    assert request["userInfo"]["username"] == "kubesim-admin" and "system:masters" in request["userInfo"]["groups"]
    assert request["object"]["spec"]["mode"] == "fast"  # validated after the schema's defaulting
    assert request["oldObject"] is None and request["dryRun"] is False and uuid.UUID(request["uid"])
    # an update carries the old object; a refused deletion keeps the object
    custom = client.CustomObjectsApi(api)
    custom.patch_namespaced_custom_object("example.com", "v1", ns, "widgets", "small", {"spec": {"size": 3}})
    update = hooks.for_path(path)[-1]["request"]
    assert update["operation"] == "UPDATE" and update["oldObject"]["spec"]["size"] == 2
    assert update["object"]["spec"]["size"] == 3
    hooks.answers[path] = lambda req: {"allowed": req["operation"] != "DELETE", "status": {"message": "keep it"}}
    status, body = refused(lambda: custom.delete_namespaced_custom_object("example.com", "v1", ns, "widgets",
                                                                          "small"))
    assert status == 400 and body["message"].endswith("denied the request: keep it")
    assert custom.get_namespaced_custom_object("example.com", "v1", ns, "widgets", "small")


def test_a_mutating_webhook_patches_before_the_schema_validates_and_warns(api, hooks, pki, ns, configurations):
    path = f"/mutate-{ns}"

    def mutate(req: dict[str, Any]) -> dict[str, Any]:
        ops = [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}]
        if "size" not in (req["object"].get("spec") or {}):
            ops.append({"op": "add", "path": "/spec/size", "value": 4})
        return {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode(),
                "warnings": ["size defaulted by the webhook"]}

    hooks.answers[path] = mutate
    configure(api, configurations, "Mutating", [hook("default.example.com", by_url(hooks, pki, path), ns)])
    answer = raw(api, "POST", f"/apis/example.com/v1/namespaces/{ns}/widgets", widget("nosize"))
    assert answer["spec"]["size"] == 4 and answer["metadata"]["labels"] == {"mutated": "yes"}
    assert answer["spec"]["mode"] == "fast"  # the schema's default, after the mutation
    stored = client.CustomObjectsApi(api).get_namespaced_custom_object("example.com", "v1", ns, "widgets", "nosize")
    assert stored["spec"]["size"] == 4
    sent = hooks.for_path(path)[0]["request"]["object"]
    assert "size" not in sent["spec"]  # the webhook saw the object before the schema's required check
    resp = api.call_api(f"/apis/example.com/v1/namespaces/{ns}/widgets", "POST", body=widget("warned", size=1),
                        header_params={"Content-Type": "application/json"}, auth_settings=["BearerToken"],
                        _preload_content=False, _return_http_data_only=True)
    assert resp.status == 201 and 'size defaulted by the webhook' in (resp.headers.get("Warning") or "")
    # a patch goes through it too: the webhook's label comes back after a patch removes it
    custom = client.CustomObjectsApi(api)
    patched = custom.patch_namespaced_custom_object("example.com", "v1", ns, "widgets", "nosize",
                                                    {"metadata": {"labels": {"mutated": None}}, "spec": {"size": 5}})
    assert patched["metadata"]["labels"] == {"mutated": "yes"} and patched["spec"]["size"] == 5


def test_tls_is_verified_and_failure_policy_decides_when_a_webhook_cannot_be_called(
        api, hooks, pki, ns, configurations, tmp_path):
    path = f"/ok-{ns}"
    hooks.answers[path] = lambda req: {}
    other = make_pki(tmp_path / "other", ["hook.webhooks.svc"], cn="another-ca")
    bad_ca = {"url": hooks.url(path), "caBundle": base64.b64encode(other.ca_pem).decode()}
    name = configure(api, configurations, "Validating", [hook("strict.example.com", bad_ca, ns)])
    status, body = refused(lambda: create(api, ns, widget("w1", size=1)))
    assert status == 500 and body["reason"] == "InternalError"
    assert 'failed calling webhook "strict.example.com": failed to call webhook: Post "https://127.0.0.1' in \
        body["message"] and "certificate verify failed" in body["message"]
    assert hooks.for_path(path) == []  # the handshake failed: nothing reached the webhook
    client.CustomObjectsApi(api).delete_cluster_custom_object(ADMISSION, "v1", "validatingwebhookconfigurations", name)
    configurations.clear()
    # a webhook that is down: Fail refuses, Ignore lets the request through
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    down = {"url": f"https://127.0.0.1:{closed}/down", "caBundle": base64.b64encode(pki.ca_pem).decode()}
    configure(api, configurations, "Validating", [hook("down-ignore.example.com", down, ns, failurePolicy="Ignore")])
    assert create(api, ns, widget("w2", size=1))["metadata"]["name"] == "w2"
    configure(api, configurations, "Validating", [hook("down-fail.example.com", down, ns, failurePolicy="Fail")])
    status, body = refused(lambda: create(api, ns, widget("w3", size=1)))
    assert status == 500 and 'failed calling webhook "down-fail.example.com"' in body["message"]


def test_a_slow_webhook_times_out(api, hooks, pki, ns, configurations):
    path = f"/slow-{ns}"
    hooks.answers[path] = lambda req: {}
    configure(api, configurations, "Validating", [hook("slow.example.com", by_url(hooks, pki, path), ns,
                                                       timeoutSeconds=1)])
    hooks.delay = 2.0
    try:
        status, body = refused(lambda: create(api, ns, widget("late", size=1)))
    finally:
        hooks.delay = 0.0
    assert status == 500 and "context deadline exceeded" in body["message"]


def test_a_service_reference_mutual_tls_and_selectors(api, pki, ns, configurations, tmp_path):
    served = make_pki(tmp_path / "svc", [f"hook.{ns}.svc"])  # the name kubesim verifies for a Service
    served.client_cert, served.client_key, served.ca_cert = pki.client_cert, pki.client_key, pki.ca_cert
    with webhook_server(served, require_client_cert=True) as server:
        server.answers["/svc"] = lambda req: {"allowed": (req["object"]["metadata"].get("labels") or {}).get(
            "team") != "blocked"}
        client.CoreV1Api(api).create_namespaced_service(ns, {
            "metadata": {"name": "hook", "annotations": {"kubesim.io/address": f"127.0.0.1:{server.port}"}},
            "spec": {"ports": [{"port": 443}]}})
        service = {"service": {"namespace": ns, "name": "hook", "path": "/svc", "port": 443},
                   "caBundle": base64.b64encode(served.ca_pem).decode()}
        selector = {"matchExpressions": [{"key": "team", "operator": "Exists"}]}
        configure(api, configurations, "Validating", [hook("svc.example.com", service, ns, objectSelector=selector)])
        assert create(api, ns, widget("unlabelled", size=1))  # the object selector does not match: not called
        assert server.reviews == []
        labelled = widget("ok", size=1)
        labelled["metadata"]["labels"] = {"team": "a"}
        assert create(api, ns, labelled)
        blocked = widget("no", size=1)
        blocked["metadata"]["labels"] = {"team": "blocked"}
        status, _ = refused(lambda: create(api, ns, blocked))
        assert status == 400
        assert {subject for _, _, subject in server.reviews} == {"kubesim-apiserver"}  # mutual TLS
        # the namespace selector: another namespace is not this webhook's business
        other = f"a-{uuid.uuid4().hex[:8]}"
        client.CoreV1Api(api).create_namespace({"metadata": {"name": other}})
        assert create(api, other, blocked)


def test_dry_run_reaches_webhooks_without_side_effects_and_stores_nothing(api, hooks, pki, ns, configurations):
    path = f"/dry-{ns}"
    hooks.answers[path] = lambda req: {}
    name = configure(api, configurations, "Validating", [hook("effects.example.com", by_url(hooks, pki, path), ns,
                                                              sideEffects="NoneOnDryRun")])
    create(api, ns, widget("dry", size=1), dry_run="All")
    assert hooks.for_path(path)[-1]["request"]["dryRun"] is True
    with pytest.raises(client.ApiException) as info:
        client.CustomObjectsApi(api).get_namespaced_custom_object("example.com", "v1", ns, "widgets", "dry")
    assert info.value.status == 404
    # admissionregistration.k8s.io/v1 knows no webhook with side effects: such a configuration is refused
    status, body = refused(lambda: client.CustomObjectsApi(api).patch_cluster_custom_object(
        ADMISSION, "v1", "validatingwebhookconfigurations", name,
        {"webhooks": [hook("effects.example.com", by_url(hooks, pki, path), ns, sideEffects="Some")]}))
    assert status == 422 and 'Unsupported value: "Some"' in body["message"]


def test_a_mutating_webhook_that_asks_is_called_again_when_a_later_one_changed_the_object(
        api, hooks, pki, ns, configurations):
    first, second = f"/first-{ns}", f"/second-{ns}"

    def patch(ops: list[dict[str, Any]]) -> dict[str, Any]:
        return {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode()}

    hooks.answers[first] = lambda req: {}
    hooks.answers[second] = lambda req: patch([{"op": "add", "path": "/spec/note", "value": "second"}])
    configure(api, configurations, "Mutating", [
        hook("first.example.com", by_url(hooks, pki, first), ns, reinvocationPolicy="IfNeeded"),
        hook("second.example.com", by_url(hooks, pki, second), ns)])
    assert create(api, ns, widget("twice", size=1))["spec"]["note"] == "second"
    calls = hooks.for_path(first)
    assert len(calls) == 2 and calls[1]["request"]["object"]["spec"]["note"] == "second"
    assert len(hooks.for_path(second)) == 1


def test_a_webhook_configuration_is_defaulted_and_validated(api, configurations):
    custom = client.CustomObjectsApi(api)
    name = configure(api, configurations, "Mutating", [{
        "name": "defaults.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "clientConfig": {"service": {"namespace": "default", "name": "hook"}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}])
    stored = custom.get_cluster_custom_object(ADMISSION, "v1", "mutatingwebhookconfigurations", name)["webhooks"][0]
    assert (stored["failurePolicy"], stored["matchPolicy"], stored["timeoutSeconds"], stored["reinvocationPolicy"],
            stored["clientConfig"]["service"]["port"], stored["rules"][0]["scope"]) == (
        "Fail", "Equivalent", 10, "Never", 443, "*")
    status, body = refused(lambda: configure(api, configurations, "Validating", [{
        "name": "bad", "admissionReviewVersions": ["v1beta1"], "sideEffects": "Unknown",
        "clientConfig": {"url": "http://127.0.0.1/x"}, "timeoutSeconds": 60,
        "rules": [{"operations": ["EXPLODE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}]))
    assert status == 422
    fields = {c["field"] for c in body["details"]["causes"]}
    assert fields == {"webhooks[0].name", "webhooks[0].admissionReviewVersions", "webhooks[0].sideEffects",
                      "webhooks[0].clientConfig.url", "webhooks[0].timeoutSeconds", "webhooks[0].rules[0].operations"}


def test_match_policy_equivalent_reaches_other_versions_and_exact_does_not(api, hooks, pki, ns, configurations):
    crd = json.loads(json.dumps(WIDGET_CRD))
    crd["metadata"]["name"] = "sprockets.example.com"
    crd["spec"]["names"] = {"plural": "sprockets", "singular": "sprocket", "kind": "Sprocket"}
    v1 = crd["spec"]["versions"][0]
    crd["spec"]["versions"] = [{**json.loads(json.dumps(v1)), "name": "v1beta1", "storage": False}, v1]
    try:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    except client.ApiException as exc:
        assert exc.status == 409
    exact, equivalent = f"/exact-{ns}", f"/equivalent-{ns}"
    hooks.answers[exact] = hooks.answers[equivalent] = lambda req: {}
    rules = [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"],
              "resources": ["sprockets"]}]
    configure(api, configurations, "Validating", [
        hook("exact.example.com", by_url(hooks, pki, exact), ns, matchPolicy="Exact", rules=rules),
        hook("equivalent.example.com", by_url(hooks, pki, equivalent), ns, matchPolicy="Equivalent", rules=rules)])
    client.CustomObjectsApi(api).create_namespaced_custom_object("example.com", "v1beta1", ns, "sprockets", {
        "apiVersion": "example.com/v1beta1", "kind": "Sprocket", "metadata": {"name": "s"}, "spec": {"size": 1}})
    assert hooks.for_path(exact) == []
    request = hooks.for_path(equivalent)[0]["request"]
    assert request["kind"]["version"] == "v1" and request["requestKind"]["version"] == "v1beta1"
    assert request["object"]["apiVersion"] == "example.com/v1"


def test_writes_of_the_status_and_scale_subresources_go_through_admission(api, hooks, pki, ns, configurations):
    path = f"/sub-{ns}"
    hooks.answers[path] = lambda req: ({"allowed": False, "status": {"message": "not that many"}}
                                       if ((req.get("object") or {}).get("spec") or {}).get("replicas") == 99 else {})
    webhook = hook("sub.example.com", by_url(hooks, pki, path), ns)
    webhook["rules"][0]["resources"] = ["widgets", "widgets/status", "widgets/scale"]
    configure(api, configurations, "Validating", [webhook])
    create(api, ns, widget("w", size=2))
    custom = client.CustomObjectsApi(api)
    custom.patch_namespaced_custom_object_scale("example.com", "v1", ns, "widgets", "w", {"spec": {"replicas": 4}})
    scale = hooks.for_path(path)[-1]["request"]
    assert (scale["operation"], scale["subResource"]) == ("UPDATE", "scale")
    assert scale["kind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert scale["object"]["spec"]["replicas"] == 4 and scale["oldObject"]["kind"] == "Scale"
    assert scale["userInfo"]["username"] == "kubesim-admin"
    status, body = refused(lambda: custom.replace_namespaced_custom_object_scale(
        "example.com", "v1", ns, "widgets", "w", {"apiVersion": "autoscaling/v1", "kind": "Scale",
                                                   "metadata": {"name": "w", "namespace": ns},
                                                   "spec": {"replicas": 99}}))
    assert status == 400 and body["message"].endswith("denied the request: not that many")
    assert custom.get_namespaced_custom_object_scale("example.com", "v1", ns, "widgets", "w")["spec"]["replicas"] == 4
    custom.patch_namespaced_custom_object_status("example.com", "v1", ns, "widgets", "w",
                                                 {"status": {"phase": "Running"}})
    status_write = hooks.for_path(path)[-1]["request"]
    assert status_write["subResource"] == "status" and status_write["object"]["status"]["phase"] == "Running"


def test_a_delete_collection_sends_each_objects_deletion_through_admission(api, hooks, pki, ns, configurations):
    path = f"/dc-{ns}"
    hooks.answers[path] = lambda req: ({"allowed": False, "status": {"message": "keep b"}}
                                       if req["operation"] == "DELETE" and req["name"] == "b" else {})
    configure(api, configurations, "Validating", [hook("dc.example.com", by_url(hooks, pki, path), ns)])
    for name in ("a", "b"):
        create(api, ns, widget(name, size=1))
    custom = client.CustomObjectsApi(api)
    status, body = refused(lambda: custom.delete_collection_namespaced_custom_object("example.com", "v1", ns,
                                                                                     "widgets"))
    assert status == 400 and body["message"].endswith("denied the request: keep b")
    deletes = sorted(r["request"]["name"] for r in hooks.for_path(path) if r["request"]["operation"] == "DELETE")
    assert deletes == ["a", "b"]
    assert len(custom.list_namespaced_custom_object("example.com", "v1", ns, "widgets")["items"]) == 2
