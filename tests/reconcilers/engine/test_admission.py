"""Admission decisions (reconcilers.engine.admission) and the generated webhook configurations: the spec model's
errors name each field, a kind's hooks refuse and default, a failing hook refuses or (Ignore) warns."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from reconcilers.engine.admission import review_mutate, review_validate
from reconcilers.engine.webhook_config import webhook_configurations
from reconcilers.kinds.memcached import MemcachedReconciler
from tests.reconcilers.testkinds import AdmittedMemcachedReconciler, GadgetReconciler


def review(obj: dict[str, Any] | None, old: dict[str, Any] | None = None, operation: str = "CREATE",
           dry_run: bool = False) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "operation": operation, "namespace": "team", "name": "cache",
        "userInfo": {"username": "alice", "groups": ["devs", "system:authenticated"]},
        "object": obj, "oldObject": old, "dryRun": dry_run}}


def memcached(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "cache", "namespace": "team"}, "spec": spec}


def test_the_spec_model_refuses_naming_every_bad_field():
    decision = review_validate(MemcachedReconciler(), review(memcached(size=-1, image="Bad:Image", port=0)))
    assert not decision.allowed and decision.code == 422
    assert [r.split(":")[0] for r in decision.reasons] == ["spec.size", "spec.image", "spec.port"]
    response = decision.response()
    assert response["allowed"] is False and response["status"]["code"] == 422
    assert response["status"]["reason"] == "Invalid" and "spec.size" in response["status"]["message"]
    assert (decision.user.username, decision.user.groups) == ("alice", ("devs", "system:authenticated"))
    assert decision.target == "cache.example.com/v1alpha1/memcacheds/team/cache"  # the key, as every action


def test_a_valid_spec_and_a_deletion_are_admitted():
    assert review_validate(MemcachedReconciler(), review(memcached(size=2))).allowed
    assert review_validate(MemcachedReconciler(), review(None, memcached(size=-1), "DELETE")).allowed


def test_a_kinds_validate_hook_adds_its_rules_on_create_and_on_change():
    kind = AdmittedMemcachedReconciler()
    decision = review_validate(kind, review(memcached(size=11, image="memcached:1.6")))
    assert decision.reasons == ["spec.image: must be pinned by digest when spec.size is above 10"]
    decision = review_validate(kind, review(memcached(size=1, port=2000), memcached(size=1, port=11211), "UPDATE"))
    assert decision.reasons == ["spec.port: may not change once set (was 11211)"]
    assert review_validate(kind, review(memcached(size=1, port=11211), memcached(size=1, port=11211),
                                        "UPDATE")).allowed


def test_a_failing_hook_refuses_naming_the_error_or_warns_under_ignore():
    kind = AdmittedMemcachedReconciler()
    decision = review_validate(kind, review(memcached(size=1, image="memcached:explode")))
    assert not decision.allowed and decision.code == 500
    assert decision.hook_error == "RuntimeError: the hook exploded"
    assert decision.reasons == ["the Memcached kind's validate hook failed: RuntimeError: the hook exploded"]

    class Lenient(AdmittedMemcachedReconciler):
        webhook_failure_policy = "Ignore"

    decision = review_validate(Lenient(), review(memcached(size=1, image="memcached:explode")))
    assert decision.allowed and decision.warnings == [
        "the Memcached kind's validate hook failed: RuntimeError: the hook exploded"]
    assert decision.response()["warnings"] == decision.warnings


def test_the_mutate_hook_is_answered_as_a_json_patch():
    decision = review_mutate(AdmittedMemcachedReconciler(), review(memcached(size=1)))
    response = decision.response()
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    assert ops == [{"op": "add", "path": "/metadata/annotations",
                    "value": {"test.opsconsole.io/requested-by": "alice"}}]
    assert review_mutate(MemcachedReconciler(), review(memcached(size=1))).patch == []


def test_the_configurations_cover_the_kinds_with_rules_and_hooks():
    mutating, validating = webhook_configurations([AdmittedMemcachedReconciler(), GadgetReconciler()],
                                                  url="https://127.0.0.1:9443", ca_bundle=b"PEM")
    assert [w["name"] for w in mutating["webhooks"]] == ["mutate.memcacheds.cache.example.com"]
    # every kind's writes are seen (Gadget judges nothing, but who wrote it still reaches the record)
    assert [w["name"] for w in validating["webhooks"]] == ["validate.memcacheds.cache.example.com",
                                                           "validate.gadgets.test.opsconsole.io"]
    hook = validating["webhooks"][0]
    assert hook["clientConfig"] == {"url": "https://127.0.0.1:9443/validate/cache.example.com/memcacheds",
                                    "caBundle": base64.b64encode(b"PEM").decode()}
    assert (hook["sideEffects"], hook["failurePolicy"], hook["matchPolicy"], hook["timeoutSeconds"]) == (
        "None", "Fail", "Equivalent", 5)
    assert hook["rules"] == [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": ["cache.example.com"],
                              "apiVersions": ["*"],
                              "resources": ["memcacheds", "memcacheds/status", "memcacheds/scale"],
                              "scope": "Namespaced"}]
    assert mutating["webhooks"][0]["rules"][0]["operations"] == ["CREATE", "UPDATE"]  # mutation: the object only
    assert mutating["webhooks"][0]["rules"][0]["resources"] == ["memcacheds"]
    service = webhook_configurations([MemcachedReconciler()])[1]["webhooks"][0]["clientConfig"]
    assert service == {"service": {"namespace": "opsconsole", "name": "opsconsole-webhooks", "port": 443,
                                   "path": "/validate/cache.example.com/memcacheds"}}


def test_the_checked_in_configurations_are_what_the_command_prints_now():
    import io
    from pathlib import Path

    from django.core.management import call_command

    checked_in = Path(__file__).resolve().parents[3] / "deploy" / "webhooks" / "configurations.yaml"
    out = io.StringIO()
    call_command("webhooks", stdout=out)
    assert out.getvalue() == checked_in.read_text(encoding="utf-8"), \
        "regenerate: manage.py webhooks > deploy/webhooks/configurations.yaml"
    call_command("webhooks", "--check", str(checked_in), stdout=io.StringIO())
    assert "cert-manager.io/inject-ca-from: opsconsole/opsconsole-webhooks" in checked_in.read_text()


def test_an_object_in_another_version_is_validated_with_that_versions_model():
    from tests.reconcilers.testkinds import SprocketReconciler

    def sprocket(version: str, spec: dict) -> dict:
        return {"apiVersion": f"test.opsconsole.io/{version}", "kind": "Sprocket",
                "metadata": {"name": "s", "namespace": "team"}, "spec": spec}

    kind = SprocketReconciler()
    assert review_validate(kind, review(sprocket("v2", {"gearing": {"count": 3}}))).allowed
    assert review_validate(kind, review(sprocket("v2", {"teeth": 3}))).reasons == ["spec.gearing: is required"]
    assert review_validate(kind, review(sprocket("v1", {"teeth": 0}))).reasons[0].startswith("spec.teeth:")


def test_status_scale_delete_and_metadata_writes_pass_whatever_the_stored_spec_and_a_spec_change_is_judged():
    from reconcilers.engine.admission import review_validate

    rec = AdmittedMemcachedReconciler()
    bad = {"metadata": {"name": "m", "namespace": "n"}, "spec": {"size": "lots"}, "status": {"phase": "Running"}}

    def review(**request: object) -> dict:
        return {"request": {"uid": "u", "namespace": "n", "name": "m", "userInfo": {"username": "engine"},
                            **request}}

    for write in (review(operation="UPDATE", subResource="status", object=bad, oldObject=bad),
                  review(operation="UPDATE", subResource="scale",
                         object={"kind": "Scale", "spec": {"replicas": 3}}, oldObject={"spec": {"replicas": 1}}),
                  review(operation="DELETE", oldObject=bad),
                  review(operation="UPDATE", object={**bad, "metadata": {**bad["metadata"], "finalizers": []}},
                         oldObject=bad)):
        decision = review_validate(rec, write)
        assert decision.allowed, (write, decision.reasons)
    changed = review_validate(rec, review(operation="UPDATE", object={**bad, "spec": {"size": "more"}},
                                          oldObject=bad))
    assert not changed.allowed and changed.code == 422
