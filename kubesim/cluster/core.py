"""Cluster: reads and writes of objects with the apiserver's rules (see the package docstring)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from kubesim import errors
from kubesim.cluster.deleting import DeletingMixin
from kubesim.cluster.options import WriteOptions
from kubesim.cluster.patching import PatchingMixin
from kubesim.cluster.strategies import PREPARE_CREATE, PREPARE_UPDATE, VALIDATE
from kubesim.errors import ApiError, cause
from kubesim.meta import clone, name_error, new_uid, now, random_suffix
from kubesim.patch import managed
from kubesim.registry import Registry, ResourceType
from kubesim.registry.crd import crd_status, resource_type_from_crd, validate_crd
from kubesim.schema import process
from kubesim.selectors import Matcher, equal_requirements
from kubesim.store import Store

CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
_QUALIFIED_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                             r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
NS_KEY = ("", "namespaces")
_SERVER_FIELDS = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink",
                  "generation")


def _spec_part(obj: dict[str, Any], with_status: bool) -> dict[str, Any]:
    skip = ("metadata", "apiVersion", "kind") + (() if not with_status else ("status",))
    return {k: v for k, v in obj.items() if k not in skip}


def _same_content(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if {k: v for k, v in a.items() if k != "metadata"} != {k: v for k, v in b.items() if k != "metadata"}:
        return False
    ma = {k: v for k, v in a["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    mb = {k: v for k, v in b["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    return ma == mb


def _go_owner_references(refs: list[Any]) -> str:
    """The references as Go's `%#v` prints a []metav1.OwnerReference (pointers shown by value)."""
    def item(ref: Any) -> str:
        ref = ref if isinstance(ref, dict) else {}
        fields = [f'{go}:{json.dumps(str(ref.get(key) or ""))}' for go, key in
                  (("APIVersion", "apiVersion"), ("Kind", "kind"), ("Name", "name"), ("UID", "uid"))]
        for go, key in (("Controller", "controller"), ("BlockOwnerDeletion", "blockOwnerDeletion")):
            value = ref.get(key)
            fields.append(f"{go}:" + ("(*bool)(nil)" if value is None else f"&{str(bool(value)).lower()}"))
        return "v1.OwnerReference{" + ", ".join(fields) + "}"
    return "[]v1.OwnerReference{" + ", ".join(item(r) for r in refs) + "}"


def _owner_reference_causes(refs: Any) -> list[dict[str, str]]:
    """apimachinery's ValidateOwnerReferences rule that at most one reference has controller=true: one cause
    per further controller, naming the first one and it."""
    if not isinstance(refs, list):
        return []
    causes = []
    first = ""
    for ref in refs:
        if not isinstance(ref, dict) or ref.get("controller") is not True:
            continue
        current = f"{ref.get('kind', '')}/{ref.get('name', '')}"
        if not first:
            first = current
            continue
        causes.append(cause("metadata.ownerReferences", "FieldValueInvalid",
                            f"Invalid value: {_go_owner_references(refs)}: Only one reference can have Controller "
                            f'set to true. Found "true" in references for {first} and {current}'))
    return causes


class Cluster(PatchingMixin, DeletingMixin):
    """All objects of the simulated cluster and the rules for changing them."""

    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        self.on_types_changed: list[Callable[[], None]] = []
        #: (CRD, its type) → (convert_out, convert_in) for CRDs converted by webhook (set by the Simulator)
        self.conversion: Callable[[dict[str, Any], ResourceType], tuple[Any, Any] | None] | None = None

    # ---- types --------------------------------------------------------------------------------------
    def resource(self, group: str, plural: str) -> ResourceType:
        """The served type (any version) or 404."""
        rt = self.registry.get(group, plural)
        if rt is None:
            raise errors.resource_not_found()
        return rt

    def sync_crd_types(self) -> None:
        """Serve exactly the resources the stored CRDs define (after loading from disk)."""
        for crd in self.store.items(CRD_KEY):
            self._register_crd(crd)

    def _register_crd(self, crd: dict[str, Any]) -> None:
        rt = resource_type_from_crd(crd)
        spec = crd["spec"]
        if rt is None:
            self.registry.remove(spec["group"], spec["names"]["plural"])
        else:
            converters = self.conversion(crd, rt) if self.conversion is not None else None
            if converters is not None:
                rt.convert_out, rt.convert_in = converters
            self.registry.add(rt)
        for cb in self.on_types_changed:
            cb()

    def _unregister_crd(self, crd: dict[str, Any]) -> None:
        self.registry.remove(crd["spec"]["group"], crd["spec"]["names"]["plural"])
        self.store.close_watchers((crd["spec"]["group"], crd["spec"]["names"]["plural"]))
        for cb in self.on_types_changed:
            cb()

    # ---- reads --------------------------------------------------------------------------------------
    def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        """The stored object or 404."""
        obj = self.store.get(rt.key, namespace if rt.namespaced else "", name)
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return obj

    def find(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object or None."""
        return self.store.get(rt.key, namespace if rt.namespaced else "", name)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        version: str | None = None,
        label: Matcher | None = None,
        field: Matcher | None = None,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> tuple[list[dict[str, Any]], int, str | None, int | None]:
        """Items (external form), list resourceVersion, continue token and remainingItemCount."""
        version = version or rt.storage_version
        list_rv = self.store.rv
        start: tuple[str, str] | None = None
        if continue_token:
            try:
                tok = json.loads(base64.urlsafe_b64decode(continue_token.encode()).decode())
                list_rv, start = int(tok["rv"]), (tok["ns"], tok["name"])
            except (ValueError, KeyError, TypeError) as e:
                raise errors.bad_request(f"continue key is not valid: {e}") from e
            if list_rv < self.store.compacted_rv:
                raise errors.gone("The provided continue parameter is too old to display a consistent list result. "
                                  "You can start a new list without the continue parameter.")
        ns = namespace if rt.namespaced else None
        out: list[dict[str, Any]] = []
        remaining = 0
        last: tuple[str, str] | None = None
        selective = label is not None or field is not None
        for obj in self._candidates(rt, ns, label):
            meta = obj["metadata"]
            pos = (meta.get("namespace", ""), meta["name"])
            if start is not None and pos <= start:
                continue
            if limit and len(out) >= limit and not selective:
                remaining += 1  # past the page, every object counts and none is converted (a page costs its size)
                continue
            ext = rt.external(obj, version)
            if label is not None and not label(ext):
                continue
            if field is not None and not field(ext):
                continue
            if limit and len(out) >= limit:
                remaining = 1  # one more match is enough for a continue token (no count is given with selectors)
                break
            out.append(ext)
            last = pos
        token = None
        if remaining and last is not None:
            raw = json.dumps({"rv": list_rv, "ns": last[0], "name": last[1]}).encode()
            token = base64.urlsafe_b64encode(raw).decode()
        count = remaining if (remaining and label is None and field is None) else None
        return out, list_rv, token, count

    def _candidates(self, rt: ResourceType, namespace: str | None, label: Matcher | None
                    ) -> Iterator[dict[str, Any]]:
        """The stored objects a list must look at, in (namespace, name) order: those carrying the selector's
        rarest `key=value` label (the store's label index), else all of them."""
        equal = equal_requirements(label)
        if not equal:
            return self.store.items(rt.key, namespace)
        k, v = min(equal, key=lambda kv: self.store.count_labelled(rt.key, *kv))
        return self.store.labelled(rt.key, namespace, k, v)

    # ---- create -------------------------------------------------------------------------------------
    def _decode_body(self, rt: ResourceType, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        kind = body.get("kind")
        if kind and kind != rt.kind:
            raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
        obj = rt.internal(clone(body))
        obj["kind"] = rt.kind
        if not isinstance(obj.get("metadata"), dict):
            obj["metadata"] = {}
        return obj

    def _check_namespace_for_create(self, rt: ResourceType, namespace: str, name: str) -> None:
        if not rt.namespaced:
            return
        ns = self.store.get(NS_KEY, "", namespace)
        if ns is None:
            raise errors.not_found("namespaces", "", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(f'{errors.qualified(rt.plural, rt.group)} "{name}" is forbidden: unable to create '
                                   f"new content in namespace {namespace} because it is being terminated",
                                   rt.plural, rt.group, name)

    def _schema_checks(self, rt: ResourceType, obj: dict[str, Any], version: str | None,
                       opts: WriteOptions) -> tuple[dict[str, Any], list[dict[str, str]]]:
        if rt.builtin:
            return obj, VALIDATE.get((rt.group, rt.plural), lambda o: [])(obj)
        if rt.convert_in is not None:  # converted by webhook to the storage version: checked against its schema
            version = rt.storage_version
        schema = rt.schemas.get(version or rt.storage_version) or {}
        res = process(obj, schema)
        if res.unknown:
            if opts.field_validation == "Strict":
                fields = ", ".join(f'unknown field "{u}"' for u in res.unknown)
                raise errors.bad_request(f"strict decoding error: {fields}")
            if opts.field_validation == "Warn":
                opts.warnings.extend(f'unknown field "{u}"' for u in res.unknown)
        return res.value, res.causes

    def _meta_causes(self, rt: ResourceType, obj: dict[str, Any]) -> list[dict[str, str]]:
        name = obj["metadata"].get("name", "")
        msg = name_error(name, label=rt.plural == "namespaces", path_segment=rt.group == "rbac.authorization.k8s.io")
        causes = [cause("metadata.name", "FieldValueInvalid", f'Invalid value: "{name}": {msg}')] if msg else []
        for key in ("labels", "annotations"):
            value = obj["metadata"].get(key)
            if value is not None and (not isinstance(value, dict) or
                                      not all(isinstance(v, str) for v in value.values())):
                causes.append(cause(f"metadata.{key}", "FieldValueTypeInvalid", "Invalid value: must be a map of "
                                    "strings"))
                continue
            for k, v in (value or {}).items():
                if not _QUALIFIED_NAME.match(k) or len(k.rsplit("/", 1)[-1]) > 63:
                    causes.append(cause(f"metadata.{key}", "FieldValueInvalid", f'Invalid value: "{k}": name part '
                                        "must consist of alphanumeric characters, '-', '_' or '.', and must start "
                                        "and end with an alphanumeric character"))
                elif key == "labels" and (len(v) > 63 or not _LABEL_VALUE.match(v)):
                    causes.append(cause("metadata.labels", "FieldValueInvalid", f'Invalid value: "{v}": a valid '
                                        "label must be an empty string or consist of alphanumeric characters, '-', "
                                        "'_' or '.', and must start and end with an alphanumeric character"))
        return causes + _owner_reference_causes(obj["metadata"].get("ownerReferences"))

    def create(self, rt: ResourceType, namespace: str, body: Any, opts: WriteOptions | None = None,
               version: str | None = None, *, applied: dict[str, Any] | None = None) -> dict[str, Any]:
        """Create an object (201 semantics); returns the stored object. ``applied``: the Apply managedFields
        entry of a create by server-side apply."""
        opts = opts or WriteOptions()
        obj = self._decode_body(rt, body)
        meta = obj["metadata"]
        meta.pop("managedFields", None)  # the server computes them
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent "
                                         "on the request")
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        if not meta.get("name"):
            if meta.get("generateName"):
                for _ in range(10):
                    meta["name"] = meta["generateName"] + random_suffix()
                    if self.find(rt, namespace, meta["name"]) is None:
                        break
            else:
                raise errors.invalid(rt.kind, rt.group, "", [cause("metadata.name", "FieldValueRequired",
                                                                   "Required value: name or generateName is required")])
        name = meta["name"]
        self._check_namespace_for_create(rt, namespace, name)
        if rt.crd_name:
            crd = self.store.get(CRD_KEY, "", rt.crd_name)
            if crd is not None and crd["metadata"].get("deletionTimestamp"):
                raise errors.method_not_allowed("create not allowed while custom resource definition is "
                                                "terminating")
        for f in _SERVER_FIELDS:
            meta.pop(f, None)
        if rt.status:
            obj.pop("status", None)
        prep = PREPARE_CREATE.get((rt.group, rt.plural))
        if prep is not None:
            prep(obj)
        obj, causes = self._schema_checks(rt, obj, version, opts)
        causes = self._meta_causes(rt, obj) + causes
        if rt.key == CRD_KEY:
            causes += validate_crd(obj)
            if not causes:
                causes += self._crd_conflicts(obj)
        if causes:
            raise errors.invalid(rt.kind, rt.group, name, causes)
        if self.find(rt, namespace, name) is not None:
            raise errors.already_exists(rt.plural, rt.group, name)
        meta = obj["metadata"]
        meta["uid"] = meta.get("uid") or new_uid()  # a create rule may need it first (a Job's selector)
        meta["creationTimestamp"] = now()
        if rt.tracks_generation:
            meta["generation"] = 1
        if rt.key == CRD_KEY:
            obj["status"] = crd_status(obj, meta["creationTimestamp"])
        self._track_fields(rt, None, obj, None, opts, version, applied, reset=False)
        if opts.dry_run:
            return obj
        stored = self.store.put(rt.key, obj)
        if rt.key == CRD_KEY:
            self._register_crd(stored)
        return stored

    def _crd_conflicts(self, crd: dict[str, Any]) -> list[dict[str, str]]:
        spec = crd["spec"]
        existing = self.registry.get(spec["group"], spec["names"]["plural"])
        if existing is not None and existing.crd_name != crd["metadata"]["name"]:
            return [cause("spec.names.plural", "FieldValueInvalid",
                          f'Invalid value: "{spec["names"]["plural"]}": is already in use')]
        return []

    # ---- update -------------------------------------------------------------------------------------
    def update(self, rt: ResourceType, namespace: str, name: str, body: Any, *, subresource: str | None = None,
               opts: WriteOptions | None = None, version: str | None = None) -> dict[str, Any]:
        """Replace an object (PUT); returns the stored object."""
        old = self.get(rt, namespace, name)
        new = self._decode_body(rt, body)
        body_name = new["metadata"].get("name")
        if body_name and body_name != name:
            raise errors.bad_request(f"the name of the object ({body_name}) does not match the name on the URL "
                                     f"({name})")
        if rt.namespaced and new["metadata"].get("namespace") not in (None, "", namespace):
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                     "the request")
        return self.replace(rt, old, new, subresource=subresource, opts=opts, version=version)

    def replace(self, rt: ResourceType, old: dict[str, Any], new: dict[str, Any], *, subresource: str | None = None,
                opts: WriteOptions | None = None, version: str | None = None,
                applied: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write ``new`` (a fresh dict in storage form) over ``old`` following every update rule.

        ``subresource``: "status" (only status changes), "scale" or None; it also names the managedFields
        entry. ``applied``: the applier's Apply entry when the write is a server-side apply."""
        opts = opts or WriteOptions()
        name = old["metadata"]["name"]
        meta = new["metadata"] = dict(new.get("metadata") or {})
        # managedFields in a body are ignored, except [{}], which clears them (before this write is recorded)
        reset = meta.pop("managedFields", None) == [{}]
        rv = meta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.plural, rt.group, name)
        uid = meta.get("uid")
        if uid and uid != old["metadata"]["uid"]:
            raise errors.conflict(rt.plural, rt.group, name, f"Precondition failed: UID in precondition: {uid}, UID "
                                  f"in object meta: {old['metadata']['uid']}")
        if subresource == "status":
            status = new.get("status")
            new = {k: v for k, v in old.items() if k != "status"}
            if status is not None:
                new["status"] = status
            new["metadata"] = meta = {k: clone(v) for k, v in old["metadata"].items() if k != "managedFields"}
        else:
            for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
                if f in old["metadata"]:
                    meta[f] = old["metadata"][f]
                else:
                    meta.pop(f, None)
            meta["name"] = name
            if rt.namespaced:
                meta["namespace"] = old["metadata"]["namespace"]
            if rt.status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            prep = PREPARE_UPDATE.get((rt.group, rt.plural))
            if prep is not None:
                causes = prep(new, old)
                if causes:
                    raise errors.invalid(rt.kind, rt.group, name, causes)
        new, causes = self._schema_checks(rt, new, version, opts)
        causes = self._meta_causes(rt, new) + causes
        if rt.key == CRD_KEY:
            causes += validate_crd(new)
            if not causes and subresource is None:
                _accumulate_stored_versions(new, old)
        if old["metadata"].get("deletionTimestamp"):
            added = [f for f in new["metadata"].get("finalizers") or [] if f not in
                     (old["metadata"].get("finalizers") or [])]
            if added:
                causes.append(cause("metadata.finalizers", "FieldValueForbidden",
                                    "Forbidden: no new finalizers can be added if the object is being deleted, "
                                    f"found new finalizers []string{{{', '.join(repr(a) for a in added)}}}"))
        if causes:
            raise errors.invalid(rt.kind, rt.group, name, causes)
        meta = new["metadata"]
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if rt.tracks_generation and _spec_part(new, rt.status) != _spec_part(old, rt.status):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if _same_content(new, old) and not (reset and old["metadata"].get("managedFields")):
            return old
        self._track_fields(rt, old, new, subresource, opts, version, applied, reset)
        if opts.dry_run:
            return new
        if self._should_delete(new):
            return self._remove(rt, new)
        stored = self.store.put(rt.key, new)
        if rt.key == CRD_KEY and not meta.get("deletionTimestamp"):
            self._register_crd(stored)
        return stored

    @staticmethod
    def _track_fields(rt: ResourceType, old: dict[str, Any] | None, new: dict[str, Any], subresource: str | None,
                      opts: WriteOptions, version: str | None, applied: dict[str, Any] | None, reset: bool) -> None:
        """Set ``new``'s managedFields for this write (see :mod:`kubesim.patch.managed`)."""
        version = version or rt.storage_version
        keys = (managed.builtin_list_keys(rt.group, rt.plural) if rt.builtin
                else managed.schema_list_keys(rt.schemas.get(version)))
        sub = subresource if subresource == "status" else None
        changed, removed = managed.diff(managed.tracked(old, sub, rt.status), managed.tracked(new, sub, rt.status),
                                        keys)
        entries = [] if (old is None or reset) else (old["metadata"].get("managedFields") or [])
        manager = applied["manager"] if applied is not None else opts.manager()
        result = managed.update_entries(entries, changed, removed, manager=manager, subresource=subresource,
                                        api_version=rt.api_version(version), time=now(), applied=applied)
        if result:
            new["metadata"]["managedFields"] = result
        else:
            new["metadata"].pop("managedFields", None)

    @staticmethod
    def _should_delete(obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return False
        return not (obj.get("kind") == "Namespace" and (obj.get("spec") or {}).get("finalizers"))

    def _remove(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        last = self.store.remove(rt.key, meta.get("namespace", ""), meta["name"], final=obj)
        if rt.key == CRD_KEY:
            self._unregister_crd(obj)
        return last if last is not None else obj

    def internal_put(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """Controllers' write path for server-owned fields: stores ``obj`` as is (fresh dict)."""
        return self.store.put(rt.key, obj)


__all__ = ["ApiError", "Cluster"]


def _accumulate_stored_versions(new: dict[str, Any], old: dict[str, Any]) -> None:
    """A CRD whose storage version changes keeps the old one in `status.storedVersions` (objects written before
    are still stored in it), as kube-apiserver does, until someone migrates them and edits the status."""
    stored = list((old.get("status") or {}).get("storedVersions") or [])
    storage = next((v["name"] for v in new["spec"].get("versions") or [] if v.get("storage")), None)
    if storage and storage not in stored:
        stored.append(storage)
    status = new.setdefault("status", dict(old.get("status") or {}))
    status["storedVersions"] = stored
