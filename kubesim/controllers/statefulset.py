"""StatefulSet controller: ordinal Pods ``<name>-<i>``, OrderedReady or Parallel, rolling updates by revision.

Each template is kept as a ControllerRevision ``<name>-<hash>`` (``data.spec.template``, ``revision`` counting
up, the oldest beyond ``revisionHistoryLimit`` removed). A RollingUpdate with ``rollingUpdate.partition`` P
updates only ordinals >= P: from the highest ordinal down, one Pod at a time, each replaced (deleted, recreated on
the update revision) only once every Pod above it is Running and Ready; a Pod below P that goes away comes back on
the current revision. ``status.currentRevision`` moves to the update revision once every Pod is updated and
Ready; ``currentReplicas``/``updatedReplicas`` count the Pods on each.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from kubesim.controllers.base import Controller
from kubesim.controllers.workloads import is_pod_ready, pod_from_template, template_hash
from kubesim.meta import clone
from kubesim.store import Event

STS_KEY = ("apps", "statefulsets")
POD_KEY = ("", "pods")
REVISION_KEY = ("apps", "controllerrevisions")
REV = "controller-revision-hash"


class StatefulSetController(Controller):
    """One step per StatefulSet."""

    name = "statefulset"

    def initial_keys(self) -> Iterable[Hashable]:
        return self.object_keys(STS_KEY)

    def keys_for(self, ev: Event) -> Iterable[Hashable]:
        if ev.key == STS_KEY:
            return [(ev.namespace, ev.obj["metadata"]["name"])]
        if ev.key == POD_KEY:
            for ref in ev.obj["metadata"].get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == "StatefulSet":
                    return [(ev.namespace, ref["name"])]
        return ()

    def sync(self, key: tuple[str, str]) -> float | None:
        ns, name = key
        rt = self.cluster.resource("apps", "statefulsets")
        pod_rt = self.cluster.resource("", "pods")
        sts = self.cluster.find(rt, ns, name)
        if sts is None or sts["metadata"].get("deletionTimestamp"):
            return None
        spec = sts.get("spec") or {}
        want = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        revision = f"{name}-{template_hash(template)}"
        self._record_revision(sts, revision, template)
        current_rev = (sts.get("status") or {}).get("currentRevision") or revision
        current_template = self._revision_template(ns, current_rev) if current_rev != revision else None
        parallel = spec.get("podManagementPolicy") == "Parallel"
        uid = sts["metadata"]["uid"]
        pods = {p["metadata"]["name"]: p for p in self.store.controlled_by(POD_KEY, ns, uid)}
        strategy = spec.get("updateStrategy") or {}
        on_delete = strategy.get("type") == "OnDelete"
        partition = 0 if on_delete else int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        for i in range(want):
            pname = f"{name}-{i}"
            pod = pods.get(pname)
            if pod is not None and (pod.get("status") or {}).get("phase") == "Failed" \
                    and not pod["metadata"].get("deletionTimestamp"):
                self.cluster.delete(pod_rt, ns, pname)
                pod = None
            if pod is None:
                if self.store.get(POD_KEY, ns, pname) is not None:
                    if not parallel:
                        break
                    continue
                old = i < partition and current_template is not None
                self._create_pod(sts, pname, i, current_rev if old else revision,
                                 current_template if old else template)
                if not parallel:
                    break
                continue
            if not parallel and not (is_pod_ready(pod) and not pod["metadata"].get("deletionTimestamp")):
                break
        else:
            # all wanted pods exist and (OrderedReady) are ready: scale down, then roll
            extra = sorted((p for n, p in pods.items() if _ordinal(n, name) >= want),
                           key=lambda p: -_ordinal(p["metadata"]["name"], name))
            if extra:
                for p in extra if parallel else extra[:1]:
                    if not p["metadata"].get("deletionTimestamp"):
                        self.cluster.delete(pod_rt, ns, p["metadata"]["name"])
            elif not on_delete:
                self._roll(pods, name, want, partition, revision)
        self._status(rt, sts, revision)
        return None

    def _create_pod(self, sts: dict[str, Any], pname: str, ordinal: int, revision: str,
                    template: dict[str, Any]) -> None:
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        labels = {REV: revision, "statefulset.kubernetes.io/pod-name": pname,
                  "apps.kubernetes.io/pod-index": str(ordinal)}
        body = pod_from_template(template, pname, ns, self.owner_ref(sts), labels, hostname=pname)
        if (sts.get("spec") or {}).get("serviceName"):
            body["spec"].setdefault("subdomain", sts["spec"]["serviceName"])
        self.cluster.create(self.cluster.resource("", "pods"), ns, body)
        self.record_event(sts, "Normal", "SuccessfulCreate",
                          f"create Pod {pname} in StatefulSet {name} successful", "statefulset-controller")

    def _roll(self, pods: dict[str, dict[str, Any]], name: str, want: int, partition: int, revision: str) -> None:
        """The real controller's update loop: from the highest ordinal down to the partition, replace the first
        Pod not on the update revision, but stop at any Pod not yet Running and Ready."""
        pod_rt = self.cluster.resource("", "pods")
        for target in range(want - 1, max(partition, 0) - 1, -1):
            pod = pods.get(f"{name}-{target}")
            if pod is None:
                return
            terminating = bool(pod["metadata"].get("deletionTimestamp"))
            if (pod["metadata"].get("labels") or {}).get(REV) != revision and not terminating:
                self.cluster.delete(pod_rt, pod["metadata"]["namespace"], pod["metadata"]["name"])
                return
            if terminating or not is_pod_ready(pod):
                return

    # ---- revisions ------------------------------------------------------------------------------------
    def _record_revision(self, sts: dict[str, Any], revision: str, template: dict[str, Any]) -> None:
        """Make sure the template has its ControllerRevision; drop the oldest beyond revisionHistoryLimit."""
        ns = sts["metadata"]["namespace"]
        rt = self.cluster.resource("apps", "controllerrevisions")
        owned = self.store.controlled_by(REVISION_KEY, ns, sts["metadata"]["uid"])
        if any(r["metadata"]["name"] == revision for r in owned):
            return
        number = max((int(r.get("revision") or 0) for r in owned), default=0) + 1
        labels = dict(((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
        labels["controller.kubernetes.io/hash"] = revision.rsplit("-", 1)[-1]
        body = {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": revision, "namespace": ns, "labels": labels,
                             "ownerReferences": [self.owner_ref(sts)]},
                "data": {"spec": {"template": {**clone(template), "$patch": "replace"}}}, "revision": number}
        if self.store.get(REVISION_KEY, ns, revision) is None:
            self.cluster.create(rt, ns, body)
        keep = {revision, (sts.get("status") or {}).get("currentRevision")}
        limit = int((sts.get("spec") or {}).get("revisionHistoryLimit", 10))
        history = sorted((r for r in owned if r["metadata"]["name"] not in keep), key=lambda r: r.get("revision", 0))
        for old in history[:max(0, len(history) - limit)]:
            self.cluster.delete(rt, ns, old["metadata"]["name"])

    def _revision_template(self, ns: str, revision: str) -> dict[str, Any] | None:
        stored = self.store.get(REVISION_KEY, ns, revision)
        template = ((stored or {}).get("data") or {}).get("spec", {}).get("template")
        if not isinstance(template, dict):
            return None
        template = clone(template)
        template.pop("$patch", None)
        return template

    def _status(self, rt: Any, sts: dict[str, Any], revision: str) -> None:
        sts = self.cluster.find(rt, sts["metadata"]["namespace"], sts["metadata"]["name"]) or sts
        uid = sts["metadata"]["uid"]
        pods = [p for p in self.store.controlled_by(POD_KEY, sts["metadata"]["namespace"], uid)
                if not p["metadata"].get("deletionTimestamp")]
        ready = sum(1 for p in pods if is_pod_ready(p))
        updated = sum(1 for p in pods if (p["metadata"].get("labels") or {}).get(REV) == revision)
        old = sts.get("status") or {}
        current_rev = old.get("currentRevision") or revision
        want = int(sts["spec"].get("replicas", 1))
        rolling = ((sts["spec"].get("updateStrategy") or {}).get("type") or "RollingUpdate") == "RollingUpdate"
        if rolling and updated == len(pods) == want and ready == want:
            current_rev = revision
        current = sum(1 for p in pods if (p["metadata"].get("labels") or {}).get(REV) == current_rev)
        status: dict[str, Any] = {"observedGeneration": sts["metadata"].get("generation", 1),
                                  "replicas": len(pods), "readyReplicas": ready, "currentReplicas": current,
                                  "updatedReplicas": updated, "availableReplicas": ready,
                                  "currentRevision": current_rev, "updateRevision": revision,
                                  "collisionCount": 0}
        for k in ("readyReplicas", "currentReplicas", "updatedReplicas"):
            if status[k] == 0:
                del status[k]
        self.write_status(rt, sts, status)


def _ordinal(pod_name: str, sts_name: str) -> int:
    suffix = pod_name[len(sts_name) + 1:]
    return int(suffix) if suffix.isdigit() else -1
