"""DELETE handling for :class:`~kubesim.cluster.core.Cluster`: preconditions, finalizers, propagation policy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.cluster.options import WriteOptions
from kubesim.meta import clone, now, now_plus
from kubesim.registry import ResourceType
from kubesim.selectors import Matcher

if TYPE_CHECKING:
    from kubesim.cluster.core import Cluster

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"


class DeletingMixin:
    """DELETE of one object and of a collection."""

    def delete(self: Cluster, rt: ResourceType, namespace: str, name: str, options: dict[str, Any] | None = None,
               opts: WriteOptions | None = None) -> tuple[dict[str, Any], bool]:
        """Delete an object; returns (object, deleted now). With finalizers it is only marked for deletion."""
        options = options or {}
        opts = opts or WriteOptions()
        old = self.get(rt, namespace, name)
        meta = old["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            raise errors.conflict(rt.plural, rt.group, name, f"Precondition failed: UID in precondition: "
                                  f"{pre['uid']}, UID in object meta: {meta['uid']}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            raise errors.conflict(rt.plural, rt.group, name, f"Precondition failed: ResourceVersion in precondition: "
                                  f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                  f"{meta['resourceVersion']}")
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        policy = policy or "Background"
        if policy not in ("Background", "Foreground", "Orphan"):
            raise errors.invalid("DeleteOptions", "meta.k8s.io", "", [errors.cause(
                "propagationPolicy", "FieldValueNotSupported", f'Unsupported value: "{policy}": supported values: '
                '"Foreground", "Background", "Orphan"')])
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Orphan" and ORPHAN not in finalizers:
            finalizers.append(ORPHAN)
        elif policy == "Foreground" and FOREGROUND not in finalizers:
            finalizers.append(FOREGROUND)
        if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions") and CRD_CLEANUP not in finalizers:
            finalizers.append(CRD_CLEANUP)
        ns_pending = rt.kind == "Namespace" and bool((old.get("spec") or {}).get("finalizers"))
        grace = _pod_grace(rt, old, options)
        if grace is not None and grace > 0:
            return self._graceful_pod_delete(rt, old, finalizers, grace, opts)
        if not finalizers and not ns_pending:
            if opts.dry_run:
                return old, True
            return self._remove(rt, old), True
        if meta.get("deletionTimestamp") and finalizers == list(meta.get("finalizers") or []) and not (
                grace == 0 and meta.get("deletionGracePeriodSeconds")):
            return old, False
        new = dict(old)
        new["metadata"] = nm = clone(meta)
        nm["finalizers"] = finalizers
        if not nm.get("deletionTimestamp"):
            nm["deletionTimestamp"] = now()
            nm["deletionGracePeriodSeconds"] = 0
            if "generation" in nm:
                nm["generation"] = int(nm["generation"]) + 1
        elif grace == 0:
            nm["deletionGracePeriodSeconds"] = 0
        if rt.kind == "Namespace":
            new["status"] = dict(old.get("status") or {}, phase="Terminating")
        if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            conditions = [c for c in (old.get("status") or {}).get("conditions") or [] if c["type"] != "Terminating"]
            conditions.append({"type": "Terminating", "status": "True", "reason": "InstanceDeletionPending",
                               "message": "CustomResourceDefinition marked for deletion; instance deletion pending",
                               "lastTransitionTime": nm["deletionTimestamp"]})
            new["status"] = dict(old.get("status") or {}, conditions=conditions)
        if opts.dry_run:
            return new, False
        return self.internal_put(rt, new), False

    def _graceful_pod_delete(self: Cluster, rt: ResourceType, old: dict[str, Any], finalizers: list[str],
                             grace: int, opts: WriteOptions) -> tuple[dict[str, Any], bool]:
        """A bound, running Pod: mark it terminating for ``grace`` seconds; the kubelet removes it."""
        meta = old["metadata"]
        current = meta.get("deletionGracePeriodSeconds")
        if meta.get("deletionTimestamp") and current is not None and current <= grace and \
                finalizers == list(meta.get("finalizers") or []):
            return old, False
        new = dict(old)
        new["metadata"] = nm = clone(meta)
        if finalizers:
            nm["finalizers"] = finalizers
        nm["deletionTimestamp"] = now_plus(grace)
        nm["deletionGracePeriodSeconds"] = grace
        if opts.dry_run:
            return new, False
        return self.internal_put(rt, new), False

    def delete_collection(self: Cluster, rt: ResourceType, namespace: str | None, label: Matcher | None,
                          field: Matcher | None, options: dict[str, Any] | None = None,
                          opts: WriteOptions | None = None) -> list[dict[str, Any]]:
        """Delete every matching object; returns their states after the delete call."""
        items, _, _, _ = self.list(rt, namespace, label=label, field=field)
        out = []
        for item in items:
            meta = item["metadata"]
            try:
                obj, _ = self.delete(rt, meta.get("namespace", ""), meta["name"], options, opts)
            except errors.ApiError as e:
                if e.code == 404:
                    continue
                raise
            out.append(obj)
        return out

    def finalize_namespace(self: Cluster, name: str, finalizers: list[str]) -> dict[str, Any]:
        """PUT namespaces/<name>/finalize: set spec.finalizers (the namespace goes once empty and deleting)."""
        rt = self.resource("", "namespaces")
        old = self.get(rt, "", name)
        new = dict(old)
        new["metadata"] = clone(old["metadata"])
        new["spec"] = dict(old.get("spec") or {}, finalizers=list(finalizers))
        if new["spec"] == old.get("spec"):
            return old
        if self._should_delete(new):
            return self._remove(rt, new)
        return self.internal_put(rt, new)


def _pod_grace(rt: ResourceType, pod: dict[str, Any], options: dict[str, Any]) -> int | None:
    """The graceful-deletion period of a Pod (None for other kinds): 0 when unbound or finished."""
    if rt.key != ("", "pods"):
        return None
    requested = options.get("gracePeriodSeconds")
    grace = int(requested) if requested is not None else int(
        (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
    if not (pod.get("spec") or {}).get("nodeName"):
        return 0
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    return max(grace, 0)
