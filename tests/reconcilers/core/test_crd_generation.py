"""CRDs generated from typed kinds: structural schemas from pydantic models, the engine's status block, the
naming, and for the built-in kinds the same verdicts as the hand-written CRDs they replaced (kubesim's schema
processing, the one kubesim applies to every write, decides both)."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import pytest
import yaml
from pydantic import Field

from kubesim.schema import process
from reconcilers.core.crd import SchemaError, crd_manifest, crd_yaml, structural_schema
from reconcilers.core.kind import KindModel, PrinterColumn, ScaleSubresource, validate_spec
from reconcilers.core.reconciler import Context, Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import PermanentError, Result
from reconcilers.kinds.memcached import MemcachedReconciler
from reconcilers.kinds.tenant import TenantReconciler

HANDWRITTEN = Path(__file__).resolve().parents[1] / "data" / "handwritten"


class Tier(Enum):
    GOLD = "gold"
    SILVER = "silver"


class Port(KindModel):
    """A port."""

    container_port: int = Field(ge=1, le=65535)
    protocol: Literal["TCP", "UDP"] = "TCP"


class WebSpec(KindModel):
    """What a Web runs."""

    replicas: int = Field(1, ge=0, le=50)
    """How many pods."""
    image: str = "nginx:1.27"
    tier: Tier = Tier.GOLD
    ports: list[Port] = Field(default_factory=list, max_length=8)
    target: int | str = 80
    labels: dict[str, str] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)
    until: datetime | None = None
    ratio: Annotated[float, Field(gt=0, le=1)] = 0.5
    hosts: set[str] = Field(default_factory=set)
    note: str = Field("", json_schema_extra={"x-kubernetes-validations": [{"rule": "self.size() < 100"}]})


class WebStatus(KindModel):
    ready_replicas: int | None = None


class WebReconciler(Reconciler):
    """Serves a website."""

    resource: ClassVar[ResourceKind] = ResourceKind("web.example.com", "v1alpha1", "webs", "Web")
    state_machine: ClassVar[StateMachine] = StateMachine.build(
        "Web", states=("Pending", "Running", "Failed"), initial="Pending",
        transitions={"Pending": ("Running", "Failed"), "Running": ("Pending", "Failed"), "Failed": ("Pending",)})
    spec_model: ClassVar[Any] = WebSpec
    status_model: ClassVar[Any] = WebStatus
    short_names: ClassVar[tuple[str, ...]] = ("wb",)
    printer_columns: ClassVar[tuple[PrinterColumn, ...]] = (PrinterColumn("Replicas", ".spec.replicas", "integer"),)
    scale: ClassVar[ScaleSubresource | None] = ScaleSubresource(status_replicas_path=".status.readyReplicas")

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        return Result("Running")


def version(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    return version(crd)["schema"]["openAPIV3Schema"]


def walk(node: Any):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def test_the_spec_schema_is_structural_and_says_what_the_model_says():
    spec = structural_schema(WebSpec)
    props = spec["properties"]
    assert spec["description"] == "What a Web runs."
    assert props["replicas"] == {"type": "integer", "description": "How many pods.", "default": 1, "minimum": 0,
                                 "maximum": 50}
    assert props["tier"] == {"type": "string", "default": "gold", "enum": ["gold", "silver"]}
    port = props["ports"]["items"]
    assert props["ports"]["maxItems"] == 8 and port["required"] == ["containerPort"]
    assert port["properties"]["protocol"] == {"type": "string", "default": "TCP", "enum": ["TCP", "UDP"]}
    assert props["target"] == {"default": 80, "x-kubernetes-int-or-string": True}
    assert props["labels"]["additionalProperties"] == {"type": "string"}
    assert props["extra"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert props["until"] == {"type": "string", "format": "date-time", "nullable": True}
    assert props["ratio"] == {"type": "number", "default": 0.5, "minimum": 0, "exclusiveMinimum": True,
                              "maximum": 1}
    assert props["hosts"]["x-kubernetes-list-type"] == "set" and "uniqueItems" not in props["hosts"]
    assert props["note"]["x-kubernetes-validations"] == [{"rule": "self.size() < 100"}]
    for node in walk(spec):  # structural: no refs, no titles, every node typed or explicitly open
        assert not {"$ref", "$defs", "title", "allOf", "anyOf", "oneOf", "const"} & set(node)


def test_the_crd_carries_the_naming_the_status_block_the_subresources_and_the_columns():
    crd = crd_manifest(WebReconciler)
    assert crd["metadata"]["name"] == "webs.web.example.com"
    assert crd["spec"]["names"] == {"plural": "webs", "singular": "web", "kind": "Web", "listKind": "WebList",
                                    "shortNames": ["wb"], "categories": ["opsconsole"]}
    assert crd["spec"]["scope"] == "Namespaced"
    assert version(crd)["subresources"] == {"status": {}, "scale": {
        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.readyReplicas"}}
    assert [c["name"] for c in version(crd)["additionalPrinterColumns"]] == ["Phase", "Replicas", "Reason", "Age"]
    status = schema_of(crd)["properties"]["status"]
    assert status["properties"]["phase"]["enum"] == ["Pending", "Running", "Failed"]
    assert status["properties"]["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert status["properties"]["readyReplicas"] == {"type": "integer", "nullable": True}
    assert "x-kubernetes-preserve-unknown-fields" not in status  # a status model: pruned to what it declares
    assert yaml.safe_load(crd_yaml(WebReconciler)) == crd


def test_a_kind_without_models_keeps_any_spec_and_status():
    class Loose(WebReconciler):
        spec_model: ClassVar[Any] = None
        status_model: ClassVar[Any] = None

    props = schema_of(crd_manifest(Loose))["properties"]
    assert props["spec"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert props["status"]["x-kubernetes-preserve-unknown-fields"] is True


def test_what_has_no_structural_form_is_refused_naming_the_field():
    class Mixed(KindModel):
        value: int | list[str] = 1

    class Node(KindModel):
        children: list[Node] = Field(default_factory=list)

    class Engine(KindModel):
        phase: str = ""

    with pytest.raises(SchemaError, match=r"spec\.value: a union of integer, array"):
        structural_schema(Mixed)
    with pytest.raises(SchemaError, match="refers to itself"):
        structural_schema(Node)

    class Clash(WebReconciler):
        status_model: ClassVar[Any] = Engine

    with pytest.raises(SchemaError, match="status.phase: the engine owns this field"):
        crd_manifest(Clash)


def test_validation_names_every_bad_field_and_applies_defaults():
    spec = validate_spec(WebSpec, {"spec": {"replicas": 3, "ports": [{"containerPort": 80}]}})
    assert spec.replicas == 3 and spec.ports[0].protocol == "TCP" and spec.tier is Tier.GOLD
    with pytest.raises(PermanentError) as info:
        validate_spec(WebSpec, {"spec": {"replicas": 99, "tier": "bronze", "ports": [{"protocol": "SCTP"}],
                                         "target": 1.5}})
    assert info.value.reason == "InvalidSpec"
    message = info.value.message
    for part in ("spec.replicas: must be at most 50 (got 99)", "spec.tier:", "spec.ports[0].containerPort: is required",
                 "spec.ports[0].protocol:", "spec.target"):
        assert part in message, message
    with pytest.raises(PermanentError, match=r"spec.replicas: Input should be a valid integer \(got '3'\)"):
        validate_spec(WebSpec, {"spec": {"replicas": "3"}})  # as the API server: a string is not an integer
    with pytest.raises(PermanentError, match="spec must be an object"):
        validate_spec(WebSpec, {"spec": [1]})


# -- the built-in kinds: generated CRD vs the hand-written one they replaced --------------------------------

def handwritten(name: str) -> dict[str, Any]:
    return schema_of(yaml.safe_load((HANDWRITTEN / name).read_text()))


def verdict(schema: dict[str, Any], obj: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    result = process(obj, schema)
    return sorted({c["field"] for c in result.causes}), result.value.get("spec", {})


def memcached(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": "m", "namespace": "default"}, "spec": spec}


MEMCACHED_CASES = [
    {"size": 3},
    {"size": 0, "image": "memcached:1.6", "port": 11311, "progressDeadlineSeconds": 30},
    {"size": 101},
    {"size": -1},
    {"size": "3"},
    {"size": 2, "port": 0},
    {"size": 2, "port": 70000},
    {"size": 2, "image": ""},
    {"size": 2, "progressDeadlineSeconds": 0},
    {"size": 2, "progressDeadlineSeconds": 1.5},
    {},
    {"size": 2, "unknown": "pruned"},
]


@pytest.mark.parametrize("spec", MEMCACHED_CASES, ids=[str(c) for c in MEMCACHED_CASES])
def test_the_generated_memcached_crd_judges_objects_as_the_hand_written_one_did(spec):
    old = verdict(handwritten("memcached.yaml"), memcached(**spec))
    new = verdict(schema_of(crd_manifest(MemcachedReconciler)), memcached(**spec))
    assert new == old


def test_an_image_reference_the_kubelet_would_not_pull_is_stored_and_refused_by_the_model():
    """The model's own validator is not in the schema (as before, the CRD takes any non-empty string): such an
    object is stored and the reconcile marks it Failed InvalidSpec, naming the field."""
    bad = memcached(size=1, image="Not An Image")
    assert verdict(schema_of(crd_manifest(MemcachedReconciler)), bad)[0] == []
    with pytest.raises(PermanentError, match=r"spec.image: not a valid image reference \(got 'Not An Image'\)"):
        validate_spec(MemcachedReconciler.spec_model, bad)


TENANT_CASES = [
    {},
    {"namespace": "acme", "admins": ["alice"], "quota": {"cpu": "4", "pods": 10}},
    {"namespace": "Not_DNS"},
    {"namespace": "x" * 64},
    {"admins": [""]},
    {"admins": "alice"},
    {"quota": {"cpu": 1.5}},
    {"quota": {"cpu": ["4"]}},
]


@pytest.mark.parametrize("spec", TENANT_CASES, ids=[str(c) for c in TENANT_CASES])
def test_the_generated_tenant_crd_judges_objects_as_the_hand_written_one_did(spec):
    obj = {"apiVersion": "tenancy.example.com/v1alpha1", "kind": "Tenant", "metadata": {"name": "t"}, "spec": spec}
    old = verdict(handwritten("tenant.yaml"), obj)
    new = verdict(schema_of(crd_manifest(TenantReconciler)), obj)
    assert new == old


def test_the_built_in_kinds_status_keeps_what_their_reconcilers_write():
    status = schema_of(crd_manifest(MemcachedReconciler))["properties"]["status"]
    obj = memcached(size=1)
    obj["status"] = {"phase": "Running", "readyReplicas": 1, "nodes": ["p"],
                     "progressStartedAt": "2026-01-01T00:00:00Z", "observedGeneration": 2,
                     "lastHandledReconcileAt": "x", "conditions": []}
    result = process({"status": obj["status"]}, {"type": "object", "properties": {"status": status}})
    assert result.causes == [] and result.unknown == [] and result.value["status"] == obj["status"]
