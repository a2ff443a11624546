"""StatefulSet controller: ordinal Pods ``<name>-<i>``, OrderedReady or Parallel, rolling updates by revision."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

from kubesim.controllers.base import Controller
from kubesim.controllers.workloads import is_pod_ready, pod_from_template, template_hash
from kubesim.store import Event

STS_KEY = ("apps", "statefulsets")
POD_KEY = ("", "pods")
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
        parallel = spec.get("podManagementPolicy") == "Parallel"
        uid = sts["metadata"]["uid"]
        pods = {p["metadata"]["name"]: p for p in self.store.controlled_by(POD_KEY, ns, uid)}
        partition = int(((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition", 0))
        on_delete = (spec.get("updateStrategy") or {}).get("type") == "OnDelete"
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
                labels = {REV: revision, "statefulset.kubernetes.io/pod-name": pname,
                          "apps.kubernetes.io/pod-index": str(i)}
                body = pod_from_template(template, pname, ns, self.owner_ref(sts), labels, hostname=pname)
                if spec.get("serviceName"):
                    body["spec"].setdefault("subdomain", spec["serviceName"])
                self.cluster.create(pod_rt, ns, body)
                self.record_event(sts, "Normal", "SuccessfulCreate",
                                  f"create Pod {pname} in StatefulSet {name} successful", "statefulset-controller")
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
                stale = sorted((p for n, p in pods.items() if 0 <= _ordinal(n, name) < want
                                and _ordinal(n, name) >= partition
                                and (p["metadata"].get("labels") or {}).get(REV) != revision),
                               key=lambda p: -_ordinal(p["metadata"]["name"], name))
                if stale and not stale[0]["metadata"].get("deletionTimestamp"):
                    self.cluster.delete(pod_rt, ns, stale[0]["metadata"]["name"])
        self._status(rt, sts, revision)
        return None

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
        if updated == len(pods) == want:
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
