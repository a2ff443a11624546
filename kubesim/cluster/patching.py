"""PATCH handling for :class:`~kubesim.cluster.core.Cluster`: merge, JSON, strategic and apply patches; scale."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from kubesim import errors
from kubesim.cluster.options import WriteOptions
from kubesim.errors import cause
from kubesim.meta import clone, get_path, json_path, load_yaml, loads, now, set_path
from kubesim.patch import apply_json_patch, merge_patch, strategic_merge
from kubesim.patch.apply import applied_paths, from_fields_v1, release, to_fields_v1
from kubesim.patch.jsonpatch import PatchError
from kubesim.patch.strategic import METADATA, StrategicPatchError, merge_keys_for
from kubesim.registry import ResourceType
from kubesim.selectors import label_selector_string

if TYPE_CHECKING:
    from kubesim.cluster.core import Cluster

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE, STRATEGIC, APPLY)


def _decode(content_type: str, raw: bytes) -> Any:
    try:
        if content_type == APPLY:
            return load_yaml(raw.decode() or "{}")
        return loads(raw or b"null")
    except (ValueError, yaml.YAMLError) as e:
        raise errors.bad_request(f"error decoding patch: {e}") from e


class PatchingMixin:
    """PATCH and the scale subresource."""

    def apply_patch(self: Cluster, rt: ResourceType, current: dict[str, Any], content_type: str, patch: Any,
                    opts: WriteOptions) -> dict[str, Any]:
        """``current`` (external form) with ``patch`` applied."""
        try:
            if content_type == MERGE:
                if not isinstance(patch, dict):
                    raise errors.bad_request("merge patch must be a JSON object")
                return merge_patch(current, patch)
            if content_type == JSON_PATCH:
                return apply_json_patch(current, patch)
            if content_type == STRATEGIC:
                if not rt.builtin:
                    raise errors.unsupported_media_type(content_type, [JSON_PATCH, MERGE, APPLY])
                if not isinstance(patch, dict):
                    raise errors.bad_request("strategic merge patch must be a JSON object")
                return strategic_merge(current, patch, merge_keys_for(rt.group, rt.plural))
            if content_type == APPLY:
                if not isinstance(patch, dict):
                    raise errors.bad_request("apply patch must be an object")
                if rt.builtin:
                    return strategic_merge(current, patch, merge_keys_for(rt.group, rt.plural))
                # a custom resource: a merge patch, but metadata is ObjectMeta, whose ownerReferences (by uid)
                # and finalizers (a set) are merged as for any object, never replaced
                merged = merge_patch(current, {k: v for k, v in patch.items() if k != "metadata"})
                if isinstance(patch.get("metadata"), dict) and isinstance(merged, dict):
                    merged["metadata"] = strategic_merge(current.get("metadata") or {}, patch["metadata"], METADATA,
                                                         ("metadata",))
                return merged
        except PatchError as e:
            raise errors.ApiError(422, "Invalid", str(e), {}) from e
        except StrategicPatchError as e:
            raise errors.bad_request(str(e)) from e
        raise errors.unsupported_media_type(content_type, list(PATCH_TYPES))

    def patch(self: Cluster, rt: ResourceType, namespace: str, name: str, content_type: str, raw: bytes, *,
              subresource: str | None = None, opts: WriteOptions | None = None,
              version: str | None = None) -> tuple[dict[str, Any], bool]:
        """PATCH an object; returns (stored object, created)."""
        opts = opts or WriteOptions()
        if content_type not in PATCH_TYPES:
            raise errors.unsupported_media_type(content_type, list(PATCH_TYPES))
        patch = _decode(content_type, raw)
        if content_type == APPLY:
            self._check_apply(rt, name, patch, opts)
        version = version or rt.storage_version
        old = self.find(rt, namespace, name)
        if old is None:
            if content_type == APPLY and subresource is None:
                return self.create(rt, namespace, clone(patch), opts, version,
                                   applied=self._apply_entry(rt, version, opts, patch)), True
            raise errors.not_found(rt.plural, rt.group, name)
        current = rt.external(old, version)
        if content_type != JSON_PATCH and "managedFields" in current["metadata"]:
            # the server computes them: only a patch that sets them ([{}] clears them) needs the old value (a
            # JSON patch may address them), and leaving them out keeps every write's copies small
            current = dict(current)
            current["metadata"] = {k: v for k, v in current["metadata"].items() if k != "managedFields"}
        patched = self.apply_patch(rt, current, content_type, patch, opts)
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise errors.bad_request("the patched object is not a valid object")
        applied = None
        if content_type == APPLY:
            current = old["metadata"].get("managedFields") or []
            mine = next((m for m in current if m.get("manager") == opts.field_manager
                         and m.get("operation") == "Apply" and m.get("subresource") == subresource), None)
            others = [m for m in current if m is not mine]
            new_paths = applied_paths(patch)
            if mine is not None:
                kept = set(new_paths)
                for m in others:
                    if m.get("operation") == "Apply":
                        kept |= from_fields_v1(m.get("fieldsV1"))
                release(patched, from_fields_v1(mine.get("fieldsV1")) - kept, kept)
            applied = self._apply_entry(rt, version, opts, patch)
            if subresource:
                applied["subresource"] = subresource
        new = rt.internal(clone(patched))
        new["kind"] = rt.kind
        new["metadata"]["name"] = name
        return self.replace(rt, old, new, subresource=subresource, opts=opts, version=version,
                            applied=applied), False

    def _check_apply(self: Cluster, rt: ResourceType, name: str, patch: Any, opts: WriteOptions) -> None:
        if not opts.field_manager:
            raise errors.invalid("PatchOptions", "meta.k8s.io", "", [
                cause("fieldManager", "FieldValueRequired", "Required value: is required for apply patch")])
        if not isinstance(patch, dict):
            raise errors.bad_request("apply patch must be an object")
        if patch.get("kind") != rt.kind:
            raise errors.bad_request(f"the kind in the apply patch ({patch.get('kind')}) does not match {rt.kind}")
        body_name = (patch.get("metadata") or {}).get("name")
        if body_name != name:
            raise errors.bad_request(f"the name of the object ({body_name}) does not match the name on the URL "
                                     f"({name})")

    @staticmethod
    def _apply_entry(rt: ResourceType, version: str, opts: WriteOptions, config: dict[str, Any]
                     ) -> dict[str, Any]:
        return {"manager": opts.field_manager, "operation": "Apply", "apiVersion": rt.api_version(version),
                "time": now(), "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(applied_paths(config))}

    # ---- scale --------------------------------------------------------------------------------------
    def get_scale(self: Cluster, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        """The autoscaling/v1 Scale of an object."""
        if rt.scale is None:
            raise errors.resource_not_found()
        obj = self.get(rt, namespace, name)
        meta = obj["metadata"]
        scale: dict[str, Any] = {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": get_path(obj, json_path(rt.scale.spec_replicas), 0) or 0},
            "status": {"replicas": get_path(obj, json_path(rt.scale.status_replicas), 0) or 0},
        }
        if rt.builtin:
            scale["status"]["selector"] = label_selector_string((obj.get("spec") or {}).get("selector"))
        elif rt.scale.label_selector:
            sel = get_path(obj, json_path(rt.scale.label_selector))
            if sel:
                scale["status"]["selector"] = sel
        return scale

    def update_scale(self: Cluster, rt: ResourceType, namespace: str, name: str, body: Any,
                     opts: WriteOptions | None = None) -> dict[str, Any]:
        """Set replicas through the scale subresource."""
        if rt.scale is None:
            raise errors.resource_not_found()
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a Scale object")
        old = self.get(rt, namespace, name)
        replicas = (body.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise errors.invalid("Scale", "autoscaling", name, [
                cause("spec.replicas", "FieldValueInvalid", f"Invalid value: {replicas}: must be greater than or "
                      "equal to 0")])
        rv = (body.get("metadata") or {}).get("resourceVersion")
        new = clone(old)
        if rv:
            new["metadata"]["resourceVersion"] = rv
        set_path(new, json_path(rt.scale.spec_replicas), replicas)
        self.replace(rt, old, new, subresource="scale", opts=opts)
        return self.get_scale(rt, namespace, name)

    def patch_scale(self: Cluster, rt: ResourceType, namespace: str, name: str, content_type: str, raw: bytes,
                    opts: WriteOptions | None = None) -> dict[str, Any]:
        """PATCH the scale subresource."""
        current = self.get_scale(rt, namespace, name)
        patched = self.apply_patch(rt, current, content_type, _decode(content_type, raw), opts or WriteOptions())
        return self.update_scale(rt, namespace, name, patched, opts)
