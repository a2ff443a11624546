"""kubesim honours `dryRun=All` on every write a what-if sends (an update, a merge patch, a server-side apply, a
status update): each goes through validation and admission (a webhook sees `dryRun: true` and may refuse), the
answer is the object as it would be, and nothing is stored (the resourceVersion does not move)."""

from __future__ import annotations

import json

from kubernetes import client

from tests.kubesim.test_admission import (  # noqa: F401 - the fixtures of the admission tests, reused
    api,
    by_url,
    cluster,
    configurations,
    configure,
    create,
    hook,
    hooks,
    ns,
    pki,
    widget,
)

PATH = "/apis/example.com/v1/namespaces/{ns}/widgets/w"


def call(api_client, method, path, body, content_type="application/json"):
    """(status, decoded answer) of a raw request with dryRun=All."""
    try:
        data = api_client.call_api(path, method, query_params=[("dryRun", "All"), ("fieldManager", "t")],
                                   header_params={"Content-Type": content_type, "Accept": "application/json"},
                                   body=body, auth_settings=["BearerToken"], _preload_content=False)
        data = data[0] if isinstance(data, tuple) else data
        return data.status, json.loads(data.data)
    except client.ApiException as exc:
        return exc.status, json.loads(exc.body)


def test_every_kind_of_write_is_a_dry_run_through_validation_and_admission(
        api, hooks, pki, ns, configurations):  # noqa: F811 - the imported fixtures
    path = f"/dryw-{ns}"
    hooks.answers[path] = lambda req: ({"allowed": False, "status": {"message": "too big"}}
                                       if ((req.get("object") or {}).get("spec") or {}).get("size") == 9 else {})
    webhook = hook("dryw.example.com", by_url(hooks, pki, path), ns, sideEffects="None")
    webhook["rules"][0]["resources"] = ["widgets", "widgets/status"]
    configure(api, configurations, "Validating", [webhook])
    live = create(api, ns, widget("w", size=1))
    rv = live["metadata"]["resourceVersion"]
    where = PATH.format(ns=ns)
    writes = [("PUT", where, {**live, "spec": {"size": 3}}, "application/json"),
              ("PATCH", where, {"spec": {"size": 4}}, "application/merge-patch+json"),
              ("PATCH", where, {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                                "spec": {"size": 5}}, "application/apply-patch+yaml"),
              ("PUT", where + "/status", {**live, "status": {"phase": "Ready"}}, "application/json")]
    for method, target, body, content_type in writes:
        status, answer = call(api, method, target, body, content_type)
        assert status == 200, (method, target, answer)
        assert hooks.for_path(path)[-1]["request"]["dryRun"] is True
        assert answer["metadata"]["resourceVersion"] == rv
    assert answer["status"]["phase"] == "Ready"
    status, answer = call(api, "PATCH", where, {"spec": {"size": 9}}, "application/merge-patch+json")
    assert status == 400 and answer["message"].endswith("denied the request: too big"), answer["message"]
    status, answer = call(api, "PATCH", where, {"spec": {"size": "many"}}, "application/merge-patch+json")
    assert status == 422 and any(c["field"] == "spec.size" for c in answer["details"]["causes"])
    stored = client.CustomObjectsApi(api).get_namespaced_custom_object("example.com", "v1", ns, "widgets", "w")
    assert stored["metadata"]["resourceVersion"] == rv and stored["spec"]["size"] == 1
    assert "status" not in stored or not stored["status"].get("phase")
