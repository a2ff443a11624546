"""Fixtures: one kubesim for this directory, stopped after its last test (short simulated delays), a fresh
namespace per test, API clients."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from kubesim.testing import KubesimHandle, running_kubesim

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"],
                  "categories": ["all"]},
        "versions": [{
            "name": "v1",
            "served": True,
            "storage": True,
            "selectableFields": [{"jsonPath": ".spec.mode"}],
            "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                     "statusReplicasPath": ".status.replicas"}},
            "additionalPrinterColumns": [
                {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            ],
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "required": ["size"],
                        "properties": {
                            "size": {"type": "integer", "minimum": 1, "maximum": 10},
                            "replicas": {"type": "integer", "default": 1},
                            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                            "name": {"type": "string", "maxLength": 8, "pattern": "^[a-z]+$"},
                            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                            "note": {"type": "string", "nullable": True},
                            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    },
                    "status": {"type": "object", "properties": {
                        "phase": {"type": "string"},
                        "replicas": {"type": "integer"},
                        "observedGeneration": {"type": "integer"},
                    }},
                },
            }},
        }],
    },
}


@pytest.fixture(scope="package")
def kubesim() -> Iterator[KubesimHandle]:
    """A kubesim for this directory's tests with fast simulated Pods and frequent bookmarks."""
    with running_kubesim(schedule_delay=0.01, start_delay=0.05, ready_delay=0.05, bookmark_interval=0.3,
                         history_size=5000, gc_interval=0.2) as k:
        yield k


@pytest.fixture(scope="package")
def api_client(kubesim: KubesimHandle) -> client.ApiClient:
    return kubesim.api_client()


@pytest.fixture(scope="package")
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture(scope="package")
def apps(api_client: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


@pytest.fixture(scope="package")
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture(scope="package")
def widgets(api_client: client.ApiClient) -> str:
    """The Widget CRD, created once."""
    ext = client.ApiextensionsV1Api(api_client)
    try:
        ext.create_custom_resource_definition(WIDGET_CRD)
    except client.ApiException as e:
        if e.status != 409:
            raise
    return "widgets"


@pytest.fixture()
def ns(core: client.CoreV1Api) -> str:
    """A namespace of the test's own."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def widget(name: str, /, size: int = 2, **spec: object) -> dict:
    """A Widget body."""
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": size, **spec}}


def raw(api_client: client.ApiClient, method: str, path: str, body: object = None,
        content_type: str = "application/json", query: list | None = None, accept: str = "application/json"
        ) -> dict:
    """One request through the client's transport (auth included); the decoded JSON answer."""
    import json

    resp = api_client.call_api(path, method, query_params=query or [], body=body,
                               header_params={"Content-Type": content_type, "Accept": accept},
                               auth_settings=["BearerToken"], _preload_content=False,
                               _return_http_data_only=True)
    return json.loads(resp.data)
