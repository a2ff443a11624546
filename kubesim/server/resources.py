"""Handlers for resource paths: /api/v1/... and /apis/<group>/<version>/... (CRUD, list, watch, subresources:
status, scale, pods/log, pods/eviction, namespaces/finalize)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kubesim import errors
from kubesim.auth.rbac import RBAC_GROUP
from kubesim.auth.request_info import forbidden_message, request_attributes, split_resource_path
from kubesim.cluster import WriteOptions
from kubesim.cluster.eviction import evict
from kubesim.cluster.patching import APPLY as APPLY_PATCH
from kubesim.cluster.patching import _decode as decode_patch
from kubesim.meta import clone, dumps_bytes
from kubesim.patch.managed import check_field_manager
from kubesim.registry import ResourceType
from kubesim.selectors import parse_field_selector, parse_label_selector
from kubesim.server.admission import AdmissionRequest
from kubesim.server.http import (
    Accept,
    flag,
    int_param,
    json_response,
    parse_accept,
    read_body,
    request_user,
    warning_headers,
)
from kubesim.server.watch import serve_watch
from kubesim.table import to_table

if TYPE_CHECKING:
    from kubesim.simulator import Simulator


@dataclass
class Target:
    """What a resource path names."""

    rt: ResourceType
    version: str
    namespace: str | None
    name: str | None
    sub: str | None


def parse_path(sim: Simulator, path: str) -> Target:
    """Resolve a resource path (404 when the server does not serve it)."""
    split = split_resource_path(path)
    if split is None:
        raise errors.resource_not_found()
    group, version, rest = split
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise errors.resource_not_found()
    rt = sim.registry.lookup(group, version, rest[0])
    if rt is None:
        raise errors.resource_not_found()
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if rt.namespaced and namespace is None and name is not None:
        raise errors.resource_not_found()
    if not rt.namespaced and namespace is not None:
        raise errors.resource_not_found()
    if sub is not None and not ((sub == "status" and rt.status) or (sub == "scale" and rt.scale)
                                or (sub in ("log", "eviction") and rt.kind == "Pod" and not rt.group)
                                or (sub == "finalize" and rt.kind == "Namespace")):
        raise errors.resource_not_found()
    return Target(rt, version, namespace, name, sub)


def _write_opts(request: web.Request) -> WriteOptions:
    q = request.query
    dry = q.getall("dryRun", [])
    if any(d != "All" for d in dry):
        raise errors.bad_request(f"Invalid dryRun value: {dry}")
    fv = q.get("fieldValidation", "Warn") or "Warn"
    if fv not in ("Strict", "Warn", "Ignore"):
        raise errors.bad_request(f"fieldValidation must be one of Ignore, Warn or Strict, got {fv}")
    check_field_manager(q.get("fieldManager"), request.method)  # kube-apiserver's ValidateFieldManager: 422
    return WriteOptions(dry_run=bool(dry), field_validation=fv, field_manager=q.get("fieldManager"),
                        force=flag(q, "force"), user_agent=request.headers.get("User-Agent", ""))


class ResourceHandler:
    """Dispatches one resource request to the cluster and renders the answer."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    @property
    def cluster(self) -> Any:
        return self.sim.cluster

    def _render(self, t: Target, obj: dict[str, Any], accept: Accept, request: web.Request,
                status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        ext = t.rt.external(obj, t.version)
        if accept.table:
            body = to_table(t.rt, t.version, [ext], include=request.query.get("includeObject", "Metadata"),
                            table_version=accept.table_version)
            return json_response(body, status, headers)
        if accept.partial:
            return json_response({"kind": "PartialObjectMetadata",
                                  "apiVersion": f"meta.k8s.io/{accept.table_version}",
                                  "metadata": ext.get("metadata", {})}, status, headers)
        return web.Response(body=self.sim.store.encoded(t.rt.key, ext), status=status,
                            content_type="application/json", headers=headers)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        t = parse_path(self.sim, request.path)
        response = await self._handle(t, request)
        warning = t.rt.deprecated.get(t.version)
        if warning and not response.prepared:  # a watch stream has sent its headers already
            header = '299 - "' + warning.replace('"', '\\"') + '"'
            existing = response.headers.get("Warning")
            response.headers["Warning"] = f"{existing}, {header}" if existing else header
        return response

    async def _handle(self, t: Target, request: web.Request) -> web.StreamResponse:
        method = request.method
        accept = parse_accept(request.headers.get("Accept"))
        if t.name is None:
            if method == "GET":
                if flag(request.query, "watch"):
                    return await serve_watch(self.sim, request, t.rt, t.version, t.namespace, accept)
                return self._list(t, request, accept)
            if method == "POST":
                return await self._create(t, request, accept)
            if method == "DELETE":
                return await self._delete_collection(t, request)
            raise errors.method_not_allowed()
        if t.sub == "log":
            if method != "GET":
                raise errors.method_not_allowed()
            return web.Response(text=pod_log(self.cluster.get(t.rt, t.namespace or "", t.name),
                                             request.query.get("container")), content_type="text/plain")
        if t.sub == "scale":
            return await self._scale(t, request)
        if t.sub == "eviction":
            if method != "POST":
                raise errors.method_not_allowed()
            code, status = evict(self.cluster, t.namespace or "", t.name, await read_body(request),
                                 _write_opts(request))
            return json_response(status, code)
        if t.sub == "finalize":
            if method != "PUT":
                raise errors.method_not_allowed()
            return await self._finalize(t, request, accept)
        if method == "GET":
            return self._render(t, self.cluster.get(t.rt, t.namespace or "", t.name), accept, request)
        if method == "PUT":
            opts = _write_opts(request)
            body = await read_body(request)
            if self._admits(t):
                body = await self._admit_write(t, request, opts, "UPDATE", body)
            self._check_rbac_write(t, request, body)
            self._check_owner_references(t, request, body, self.cluster.find(t.rt, t.namespace or "", t.name))
            obj = self.cluster.update(t.rt, t.namespace or "", t.name, body, subresource=t.sub, opts=opts,
                                      version=t.version)
            return self._render(t, obj, accept, request, 200, warning_headers(opts.warnings))
        if method == "PATCH":
            opts = _write_opts(request)
            raw = await request.read()
            self._check_apply_create(t, request)
            if self._guards_rbac_write(t) or (self.sim.authorizer is not None and b"ownerReferences" in raw):
                # the patched object is what must not escalate or block its owners' deletion: try it first
                old = self.cluster.find(t.rt, t.namespace or "", t.name)
                dry, _ = self.cluster.patch(t.rt, t.namespace or "", t.name, request.content_type, raw,
                                            subresource=t.sub, opts=replace(opts, dry_run=True, warnings=[]),
                                            version=t.version)
                self._check_rbac_write(t, request, dry)
                self._check_owner_references(t, request, dry, old)
            if self._admits(t):
                mutated = await self._admit_patch(t, request, opts, raw)
                if mutated is not None:  # a mutating webhook changed the patched object: write it whole
                    obj = self.cluster.update(t.rt, t.namespace or "", t.name or "", mutated, subresource=t.sub,
                                              opts=opts, version=t.version)
                    return self._render(t, obj, accept, request, 200, warning_headers(opts.warnings))
            obj, created = self.cluster.patch(t.rt, t.namespace or "", t.name, request.content_type, raw,
                                              subresource=t.sub, opts=opts, version=t.version)
            return self._render(t, obj, accept, request, 201 if created else 200, warning_headers(opts.warnings))
        if method == "DELETE" and t.sub is None:
            return await self._delete(t, request, accept)
        raise errors.method_not_allowed()

    def _list(self, t: Target, request: web.Request, accept: Accept) -> web.Response:
        q = request.query
        label = parse_label_selector(q.get("labelSelector"))
        field = parse_field_selector(q.get("fieldSelector"), t.rt.field_selectors)
        rv = q.get("resourceVersion")
        if rv not in (None, "", "0"):
            try:
                wanted = int(rv)
            except ValueError as e:
                raise errors.bad_request(f"invalid resource version: {rv}") from e
            if wanted > self.sim.store.rv:
                raise errors.ApiError(504, "Timeout", f"Too large resource version: {wanted}, current: "
                                      f"{self.sim.store.rv}", {"causes": [{"reason": "ResourceVersionTooLarge",
                                                                          "message": "Too large resource version"}],
                                                               "retryAfterSeconds": 1})
        items, list_rv, token, remaining = self.cluster.list(
            t.rt, t.namespace, version=t.version, label=label, field=field,
            limit=int_param(q, "limit"), continue_token=q.get("continue") or None)
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        if accept.table:
            return json_response(to_table(t.rt, t.version, items, include=q.get("includeObject", "Metadata"),
                                          table_version=accept.table_version, list_meta=meta))
        if accept.partial:
            return json_response({"kind": "PartialObjectMetadataList",
                                  "apiVersion": f"meta.k8s.io/{accept.table_version}", "metadata": meta,
                                  "items": [{"kind": "PartialObjectMetadata",
                                             "apiVersion": f"meta.k8s.io/{accept.table_version}",
                                             "metadata": i["metadata"]} for i in items]})
        head = dumps_bytes({"kind": t.rt.list_kind, "apiVersion": t.rt.api_version(t.version), "metadata": meta})
        store = self.sim.store
        body = b"".join([head[:-1], b',"items":[', b",".join(store.encoded(t.rt.key, i) for i in items),
                         b"]}"])
        return web.Response(body=body, content_type="application/json")

    async def _create(self, t: Target, request: web.Request, accept: Accept) -> web.Response:
        opts = _write_opts(request)
        body = await read_body(request)
        if t.rt.namespaced and t.namespace is None:
            raise errors.resource_not_found()
        if self._admits(t):
            body = await self._admit_write(t, request, opts, "CREATE", body)
        self._check_rbac_write(t, request, body)
        self._check_owner_references(t, request, body, None)
        obj = self.cluster.create(t.rt, t.namespace or "", body, opts, t.version)
        return self._render(t, obj, accept, request, 201, warning_headers(opts.warnings))

    # -- admission (kubesim.server.admission) --------------------------------------------------------------

    def _admits(self, t: Target) -> bool:
        return self.sim.admission.active() and t.sub in (None, "status", "scale")

    def _admission_request(self, t: Target, request: web.Request, opts: WriteOptions, operation: str,
                           obj: dict[str, Any] | None, old: dict[str, Any] | None) -> AdmissionRequest:
        name = t.name or ((obj or {}).get("metadata") or {}).get("name") or ""
        options = {"fieldManager": opts.field_manager} if opts.field_manager else {}
        return AdmissionRequest(t.rt, t.version, operation, t.namespace or "", name, t.sub or "",
                                request_user(request), opts.dry_run, obj,
                                t.rt.external(old, t.version) if old is not None else None, options)

    async def _admit_write(self, t: Target, request: web.Request, opts: WriteOptions, operation: str,
                           body: Any) -> Any:
        """Create (POST) or update (PUT) `body` through admission: the mutating webhooks, the server's own
        defaulting and validation (a dry run), the validating webhooks on the result; returns the body to
        write."""
        if not isinstance(body, dict):
            return body
        body = clone(body)
        body.setdefault("apiVersion", t.rt.api_version(t.version))
        body.setdefault("kind", t.rt.kind)
        old = self.cluster.find(t.rt, t.namespace or "", t.name) if operation == "UPDATE" else None
        req = self._admission_request(t, request, opts, operation, body, old)
        body = await self.sim.admission.mutate(req) or body
        dry = replace(opts, dry_run=True, warnings=[])
        if operation == "CREATE":
            final = self.cluster.create(t.rt, t.namespace or "", clone(body), dry, t.version)
            body.setdefault("metadata", {})["name"] = final["metadata"]["name"]  # a generateName keeps its pick
            req.name = final["metadata"]["name"]
        else:
            final = self.cluster.update(t.rt, t.namespace or "", t.name or "", clone(body), subresource=t.sub,
                                        opts=dry, version=t.version)
        await self.sim.admission.validate(req, t.rt.external(final, t.version))
        opts.warnings.extend(req.warnings)
        return body

    async def _admit_patch(self, t: Target, request: web.Request, opts: WriteOptions, raw: bytes
                           ) -> dict[str, Any] | None:
        """A PATCH through admission: the patched object (a dry run) to the mutating webhooks and, as it would
        be stored, to the validating ones. Returns the object to write whole when a mutating webhook changed
        it, None to apply the patch as sent."""
        old = self.cluster.find(t.rt, t.namespace or "", t.name or "")
        dry = replace(opts, dry_run=True, warnings=[])
        patched, _ = self.cluster.patch(t.rt, t.namespace or "", t.name or "", request.content_type, raw,
                                        subresource=t.sub, opts=dry, version=t.version)
        patched = t.rt.external(patched, t.version)
        req = self._admission_request(t, request, opts, "CREATE" if old is None else "UPDATE", patched, old)
        mutated = await self.sim.admission.mutate(req)
        result: dict[str, Any] | None = None
        final = patched
        if mutated is not None and mutated != patched and old is not None:
            result = mutated
            final = t.rt.external(self.cluster.update(t.rt, t.namespace or "", t.name or "", clone(mutated),
                                                      subresource=t.sub, opts=replace(dry, warnings=[]),
                                                      version=t.version), t.version)
        await self.sim.admission.validate(req, final)
        opts.warnings.extend(req.warnings)
        return result

    async def _admit_delete(self, t: Target, request: web.Request, opts: WriteOptions) -> None:
        old = self.cluster.find(t.rt, t.namespace or "", t.name or "")
        if old is None:
            return
        req = self._admission_request(t, request, opts, "DELETE", None, old)
        await self.sim.admission.mutate(req)
        await self.sim.admission.validate(req, None)
        opts.warnings.extend(req.warnings)

    def _guards_rbac_write(self, t: Target) -> bool:
        return (self.sim.authorizer is not None and t.rt.group == RBAC_GROUP and t.sub is None
                and t.rt.plural in ("roles", "clusterroles", "rolebindings", "clusterrolebindings"))

    def _check_rbac_write(self, t: Target, request: web.Request, obj: Any) -> None:
        """Under RBAC, escalation prevention on a (Cluster)Role or (Cluster)RoleBinding written as `obj`."""
        if not self._guards_rbac_write(t) or not isinstance(obj, dict):
            return
        authorizer, user = self.sim.authorizer, request_user(request)
        assert authorizer is not None
        if t.rt.plural in ("roles", "clusterroles"):
            authorizer.check_role_write(user, t.rt.plural, t.namespace or "", obj)
        else:
            authorizer.check_binding_write(user, t.rt.plural, t.namespace or "", obj)

    def _check_apply_create(self, t: Target, request: web.Request) -> None:
        """Under RBAC, an apply PATCH that would create its object needs `create` too, as kube-apiserver's patch
        handler authorizes it (403 with the create message otherwise)."""
        if (self.sim.authorizer is None or t.sub is not None or request.content_type != APPLY_PATCH
                or self.cluster.find(t.rt, t.namespace or "", t.name or "") is not None):
            return
        attrs = replace(request_attributes(request_user(request), "PATCH", request.path), verb="create")
        if not self.sim.authorize(attrs):
            raise errors.forbidden(forbidden_message(attrs), t.rt.plural, t.rt.group, t.name or "")

    def _check_owner_references(self, t: Target, request: web.Request, obj: Any, old: dict[str, Any] | None) -> None:
        """Under RBAC, OwnerReferencesPermissionEnforcement on an object written as `obj` (`old`: before)."""
        if self.sim.authorizer is None or t.sub is not None or not isinstance(obj, dict):
            return

        def plural_of(api_version: str, kind: str) -> str | None:
            rt = self.sim.registry.by_kind(api_version, kind)
            return rt.plural if rt is not None else None

        self.sim.authorizer.check_owner_references(request_user(request), errors.qualified(t.rt.plural, t.rt.group),
                                                   t.namespace or "", obj, old, plural_of)

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        body = await read_body(request)
        options = dict(body) if isinstance(body, dict) else {}
        q = request.query
        if q.get("propagationPolicy"):
            options["propagationPolicy"] = q["propagationPolicy"]
        if q.get("orphanDependents"):
            options["orphanDependents"] = flag(q, "orphanDependents")
        if q.get("gracePeriodSeconds"):
            options["gracePeriodSeconds"] = int_param(q, "gracePeriodSeconds")
        return options

    async def _delete(self, t: Target, request: web.Request, accept: Accept) -> web.Response:
        opts = _write_opts(request)
        options = await self._delete_options(request)
        if self._admits(t):
            await self._admit_delete(t, request, opts)
        obj, deleted = self.cluster.delete(t.rt, t.namespace or "", t.name, options, opts)
        if deleted and not t.rt.return_deleted:
            meta = obj["metadata"]
            details: dict[str, Any] = {"name": meta["name"], "kind": t.rt.plural, "uid": meta.get("uid")}
            if t.rt.group:
                details["group"] = t.rt.group
            return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                  "details": details})
        return self._render(t, obj, accept, request)

    async def _delete_collection(self, t: Target, request: web.Request) -> web.Response:
        opts = _write_opts(request)
        options = await self._delete_options(request)
        q = request.query
        label = parse_label_selector(q.get("labelSelector"))
        field = parse_field_selector(q.get("fieldSelector"), t.rt.field_selectors)
        if self._admits(t):  # as kube-apiserver: each object's deletion goes through admission
            matching, _, _, _ = self.cluster.list(t.rt, t.namespace, label=label, field=field)
            for item in matching:
                meta = item["metadata"]
                await self._admit_delete(replace(t, namespace=meta.get("namespace") or None, name=meta["name"]),
                                         request, opts)
        items = self.cluster.delete_collection(t.rt, t.namespace, label, field, options, opts)
        return json_response({"kind": t.rt.list_kind, "apiVersion": t.rt.api_version(t.version),
                              "metadata": {"resourceVersion": str(self.sim.store.rv)},
                              "items": [t.rt.external(i, t.version) for i in items]})

    async def _scale(self, t: Target, request: web.Request) -> web.Response:
        ns = t.namespace or ""
        if request.method == "GET":
            return json_response(self.cluster.get_scale(t.rt, ns, t.name))
        opts = _write_opts(request)
        if request.method == "PUT":
            body = await read_body(request)
            if self._admits(t):
                await self._admit_scale(t, request, opts, body)
            return json_response(self.cluster.update_scale(t.rt, ns, t.name, body, opts))
        if request.method == "PATCH":
            raw = await request.read()
            if self._admits(t):
                current = self.cluster.get_scale(t.rt, ns, t.name)
                patched = self.cluster.apply_patch(t.rt, current, request.content_type,
                                                   decode_patch(request.content_type, raw),
                                                   replace(opts, dry_run=True, warnings=[]))
                await self._admit_scale(t, request, opts, patched)
            return json_response(self.cluster.patch_scale(t.rt, ns, t.name, request.content_type, raw, opts))
        raise errors.method_not_allowed()

    async def _admit_scale(self, t: Target, request: web.Request, opts: WriteOptions, body: Any) -> None:
        """A write of the scale subresource through admission, as kube-apiserver sends it: UPDATE, subresource
        `scale`, the autoscaling/v1 Scale before and after (refused by the server's own checks first)."""
        ns = t.namespace or ""
        old = self.cluster.get_scale(t.rt, ns, t.name or "")
        self.cluster.update_scale(t.rt, ns, t.name or "", body, replace(opts, dry_run=True, warnings=[]))
        new = clone(old)
        new["spec"]["replicas"] = body["spec"]["replicas"]
        options = {"fieldManager": opts.field_manager} if opts.field_manager else {}
        req = AdmissionRequest(t.rt, t.version, "UPDATE", ns, t.name or "", "scale", request_user(request),
                               opts.dry_run, new, old, options)
        await self.sim.admission.mutate(req)
        await self.sim.admission.validate(req, new)
        opts.warnings.extend(req.warnings)

    async def _finalize(self, t: Target, request: web.Request, accept: Accept) -> web.Response:
        body = await read_body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a Namespace")
        obj = self.cluster.finalize_namespace(t.name, (body.get("spec") or {}).get("finalizers") or [])
        return self._render(t, obj, accept, request)


def pod_log(pod: dict[str, Any], container: str | None) -> str:
    """What the simulated containers "printed": one line per lifecycle fact kubesim knows."""
    containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
    name = container or (containers[0] if containers else "")
    if name not in containers:
        raise errors.bad_request(f"container {name} is not valid for pod {pod['metadata']['name']}")
    status = next((s for s in (pod.get("status") or {}).get("containerStatuses") or [] if s.get("name") == name),
                  None)
    pod_name = pod["metadata"]["name"]
    if status is None or ("waiting" in (status.get("state") or {}) and not status.get("restartCount")):
        raise errors.bad_request(f'container "{name}" in pod "{pod_name}" is waiting to start: ContainerCreating')
    lines = [f"kubesim: container {name} started from image {status.get('image')}"]
    if status.get("restartCount"):
        lines.append(f"kubesim: container {name} exited with code 1 and was restarted "
                     f"{status['restartCount']} times")
    term = (status.get("state") or {}).get("terminated")
    if term:
        lines.append(f"kubesim: container {name} terminated: {term.get('reason')} (exit code {term.get('exitCode')})")
    return "\n".join(lines) + "\n"
