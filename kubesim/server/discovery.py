"""Discovery and metadata endpoints: /version, /api, /apis, APIResourceLists, health, OpenAPI v3 and v2.

Aggregated discovery is not advertised, so clients (kubectl included) fall back to legacy discovery.
The OpenAPI v3 documents only declare each resource's PATCH operation and its ``fieldValidation``
parameter (enough for kubectl to rely on server-side field validation) and each custom resource's schema.
The OpenAPI v2 document (see :mod:`kubesim.server.openapi_v2`) carries the custom resources' definitions and
paths, as JSON or as gnostic protobuf, with an ETag. Every document is rebuilt only when the registry changes
(a CRD created, updated or deleted).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kubesim import KUBE_VERSION, errors
from kubesim.cluster.core import CRD_KEY
from kubesim.meta import dumps
from kubesim.registry import ResourceType
from kubesim.server import openapi_v2
from kubesim.server.http import json_response

if TYPE_CHECKING:
    from kubesim.simulator import Simulator


def version_info() -> dict[str, str]:
    """The /version document."""
    major, minor, patch = KUBE_VERSION
    return {"major": str(major), "minor": str(minor), "gitVersion": f"v{major}.{minor}.{patch}-kubesim",
            "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0", "compiler": "gc",
            "platform": "linux/amd64"}


def _resource_entries(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                            "kind": rt.kind, "verbs": rt.verbs}
    if rt.short_names:
        main["shortNames"] = rt.short_names
    if rt.categories:
        main["categories"] = rt.categories
    main["storageVersionHash"] = hashlib.sha256(f"{rt.group}/{rt.plural}".encode()).hexdigest()[:11]
    out = [main]
    if rt.status:
        out.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                    "kind": rt.kind, "verbs": ["get", "patch", "update"]})
    if rt.scale:
        out.append({"name": f"{rt.plural}/scale", "singularName": "", "namespaced": rt.namespaced,
                    "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]})
    if rt.kind == "Pod" and not rt.group:
        out.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]})
        out.append({"name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy",
                    "version": "v1", "kind": "Eviction", "verbs": ["create"]})
    if rt.kind == "Namespace":
        out.append({"name": "namespaces/finalize", "singularName": "", "namespaced": False, "kind": "Namespace",
                    "verbs": ["update"]})
    return out


class Discovery:
    """Builds the discovery documents from the registry (cached until the registry changes)."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        #: key → (registry generation, body, ETag) of each document built
        self._cache: dict[str, tuple[int, bytes, str]] = {}
        self._v2_document: tuple[int, dict[str, Any]] | None = None

    def _cached_body(self, key: str, build: Callable[[], Any],
                     encode: Callable[[Any], bytes] | None = None) -> tuple[bytes, str]:
        """The body and ETag of document ``key``, built by ``build`` (None: 404) and encoded by ``encode`` (JSON
        by default) only when the registry changed since it was last built."""
        gen = self.sim.registry.generation
        hit = self._cache.get(key)
        if hit is None or hit[0] != gen:
            doc = build()
            if doc is None:
                raise errors.resource_not_found()
            body = encode(doc) if encode is not None else dumps(doc).encode()
            hit = (gen, body, '"' + hashlib.sha512(body).hexdigest()[:64].upper() + '"')
            self._cache[key] = hit
        return hit[1], hit[2]

    def _cached(self, key: str, build: Callable[[], Any]) -> web.Response:
        body, _ = self._cached_body(key, build)
        return web.Response(body=body, content_type="application/json")

    def api_versions(self, request: web.Request) -> web.Response:
        host = request.host
        return json_response({"kind": "APIVersions", "versions": ["v1"],
                              "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]})

    def _group(self, group: str, versions: list[str]) -> dict[str, Any]:
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}

    def api_groups(self, request: web.Request) -> web.Response:
        return self._cached("/apis", lambda: {
            "kind": "APIGroupList", "apiVersion": "v1",
            "groups": [self._group(g, vs) for g, vs in self.sim.registry.groups()]})

    def api_group(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]

        def build() -> dict[str, Any] | None:
            for g, vs in self.sim.registry.groups():
                if g == group:
                    return {"kind": "APIGroup", "apiVersion": "v1", **self._group(g, vs)}
            return None

        return self._cached(f"/apis/{group}", build)

    def resource_list(self, request: web.Request) -> web.Response:
        group = request.match_info.get("group", "")
        version = request.match_info["version"]

        def build() -> dict[str, Any] | None:
            types = self.sim.registry.in_group_version(group, version)
            if not types:
                return None
            resources = [e for rt in sorted(types, key=lambda r: r.plural) for e in _resource_entries(rt)]
            gv = f"{group}/{version}" if group else version
            return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

        return self._cached(f"/gv/{group}/{version}", build)

    # ---- OpenAPI v3 -----------------------------------------------------------------------------------
    def _gv_list(self) -> list[tuple[str, str]]:
        out = [("", "v1")]
        for g, vs in self.sim.registry.groups():
            out.extend((g, v) for v in vs)
        return out

    def openapi_index(self, request: web.Request) -> web.Response:
        def build() -> dict[str, Any]:
            paths = {}
            for g, v in self._gv_list():
                rel = f"api/{v}" if not g else f"apis/{g}/{v}"
                h = hashlib.sha256(f"{rel}:{self.sim.registry.generation}".encode()).hexdigest()[:16].upper()
                paths[rel] = {"serverRelativeURL": f"/openapi/v3/{rel}?hash={h}"}
            return {"paths": paths}

        return self._cached("/openapi/v3", build)

    def openapi_gv(self, request: web.Request) -> web.Response:
        rel = request.match_info["path"].strip("/")
        parts = rel.split("/")
        if parts[0] == "api" and len(parts) == 2:
            group, version = "", parts[1]
        elif parts[0] == "apis" and len(parts) == 3:
            group, version = parts[1], parts[2]
        else:
            raise errors.resource_not_found()

        def build() -> dict[str, Any] | None:
            types = self.sim.registry.in_group_version(group, version)
            if not types:
                return None
            prefix = f"/api/{version}" if not group else f"/apis/{group}/{version}"
            paths: dict[str, Any] = {}
            for rt in types:
                base = f"{prefix}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{prefix}/{rt.plural}"
                gvk = {"group": group, "version": version, "kind": rt.kind}
                paths[f"{base}/{{name}}"] = {"patch": {
                    "operationId": f"patch{rt.kind}",
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk,
                    "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"},
                                    "uniqueItems": True},
                                   {"name": "fieldManager", "in": "query", "schema": {"type": "string"},
                                    "uniqueItems": True},
                                   {"name": "dryRun", "in": "query", "schema": {"type": "string"},
                                    "uniqueItems": True}],
                    "responses": {"200": {"description": "OK"}},
                }}
            return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": version_info()["gitVersion"]},
                    "paths": paths, "components": {"schemas": crd_components(types, group, version)}}

        return self._cached(f"/openapi/{group}/{version}", build)

    # ---- OpenAPI v2 -----------------------------------------------------------------------------------
    def _openapi_v2_document(self) -> dict[str, Any]:
        """The /openapi/v2 document, built once per registry generation (JSON and protobuf share it)."""
        gen = self.sim.registry.generation
        if self._v2_document is None or self._v2_document[0] != gen:
            def stored_crd(rt: ResourceType) -> dict[str, Any] | None:
                return self.sim.store.get(CRD_KEY, "", rt.crd_name) if rt.crd_name else None

            doc = openapi_v2.build_document(self.sim.registry, stored_crd, _OBJECT_META_SCHEMA,
                                            version_info()["gitVersion"])
            self._v2_document = (gen, doc)
        return self._v2_document[1]

    def openapi_v2(self, request: web.Request) -> web.Response:
        """GET /openapi/v2: the Swagger 2.0 document of the custom resources, as gnostic protobuf when the client
        asks for it first (kubectl does), else as JSON; with an ETag, 304 Not Modified when If-None-Match has it."""
        if _wants_protobuf(request.headers.get("Accept", "")):
            body, etag = self._cached_body("/openapi/v2#protobuf", self._openapi_v2_document,
                                           openapi_v2.encode_document)
            content_type = openapi_v2.PROTOBUF_TYPE
        else:
            body, etag = self._cached_body("/openapi/v2", self._openapi_v2_document)
            content_type = "application/json"
        headers = {"ETag": etag, "Vary": "Accept"}
        match = request.headers.get("If-None-Match", "")
        if match and (match.strip() == "*" or etag in [m.strip().removeprefix("W/") for m in match.split(",")]):
            return web.Response(status=304, headers=headers)
        return web.Response(body=body, headers={**headers, "Content-Type": content_type})


def _wants_protobuf(accept: str) -> bool:
    """Whether the first media type of ``accept`` this server can answer is the gnostic protobuf one."""
    for part in accept.split(","):
        media = part.split(";")[0].strip().lower()
        if media.startswith("application/com.github.proto-openapi.spec.v2") and media.endswith("+protobuf"):
            return True
        if media in ("application/json", "application/*", "*/*"):
            return False
    return False


# ---- CRD schemas in OpenAPI v3 (kubectl explain, client-side tooling) ------------------------------------------

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_API_VERSION_DOC = ("APIVersion defines the versioned schema of this representation of an object. Servers should "
                    "convert recognized schemas to the latest internal value, and may reject unrecognized values.")
_KIND_DOC = ("Kind is a string value representing the REST resource this object represents. Servers may infer this "
             "from the endpoint the client submits requests to. Cannot be updated. In CamelCase.")
_META_DOC = "Standard object's metadata."
#: the ObjectMeta fields a CRD's `metadata` refers to, as kube-apiserver describes them (abridged)
_OBJECT_META_SCHEMA: dict[str, Any] = {
    "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects "
                   "users must create.",
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Name must be unique within a namespace."},
        "namespace": {"type": "string", "description": "Namespace defines the space within which each name must "
                                                       "be unique."},
        "labels": {"type": "object", "additionalProperties": {"type": "string"},
                   "description": "Map of string keys and values that can be used to organize and categorize "
                                  "(scope and select) objects."},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"},
                        "description": "Annotations is an unstructured key value map stored with a resource."},
        "uid": {"type": "string", "description": "UID is the unique in time and space value for this object."},
        "generation": {"type": "integer", "format": "int64",
                       "description": "A sequence number representing a specific generation of the desired state."},
        "resourceVersion": {"type": "string", "description": "An opaque value that represents the internal "
                                                             "version of this object."},
        "creationTimestamp": {"type": "string", "format": "date-time",
                              "description": "A timestamp representing the server time when this object was "
                                             "created."},
        "deletionTimestamp": {"type": "string", "format": "date-time",
                              "description": "The time after which this resource will be deleted."},
        "finalizers": {"type": "array", "items": {"type": "string"},
                       "description": "Must be empty before the object is deleted from the registry."},
    },
}


def component_name(group: str, version: str, kind: str) -> str:
    """kube-apiserver's schema name of a CRD kind: the group reversed, the version, the kind
    (cache.example.com/v1alpha1 Memcached → com.example.cache.v1alpha1.Memcached)."""
    return ".".join([*reversed(group.split(".")), version, kind]) if group else f"{version}.{kind}"


def crd_components(types: list[Any], group: str, version: str) -> dict[str, Any]:
    """The `components.schemas` of one group/version's OpenAPI v3 document: each custom resource's schema for that
    version (its CRD's openAPIV3Schema, with apiVersion, kind and metadata described as kube-apiserver does and
    `x-kubernetes-group-version-kind` naming it), so `kubectl explain` finds its fields; ObjectMeta when one
    refers to it. Built-in kinds carry no schema here (kubesim does not model them in OpenAPI)."""
    out: dict[str, Any] = {}
    for rt in types:
        schema = (rt.schemas or {}).get(version)
        if rt.builtin or not schema:
            continue
        doc = json.loads(json.dumps(schema))  # a copy: the registry's schema stays as the CRD declared it
        props = doc.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string", "description": _API_VERSION_DOC})
        props.setdefault("kind", {"type": "string", "description": _KIND_DOC})
        props["metadata"] = {"allOf": [{"$ref": f"#/components/schemas/{OBJECT_META}"}], "description": _META_DOC}
        doc["x-kubernetes-group-version-kind"] = [{"group": group, "kind": rt.kind, "version": version}]
        out[component_name(group, version, rt.kind)] = doc
        out[OBJECT_META] = _OBJECT_META_SCHEMA
    return out
