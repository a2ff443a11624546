"""Deployment controller: ReplicaSets per pod template, rolling updates (maxSurge/maxUnavailable) or
Recreate, and status with Available/Progressing conditions (including ProgressDeadlineExceeded)."""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable
from typing import Any

from kubesim.controllers.base import Controller
from kubesim.controllers.workloads import condition, resolve_int_or_percent, strip_hash_label, template_hash
from kubesim.meta import clone, now, parse_time
from kubesim.store import Event

DEPLOY_KEY = ("apps", "deployments")
RS_KEY = ("apps", "replicasets")
HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"


class DeploymentController(Controller):
    """One step per Deployment."""

    name = "deployment"

    def initial_keys(self) -> Iterable[Hashable]:
        return self.object_keys(DEPLOY_KEY)

    def keys_for(self, ev: Event) -> Iterable[Hashable]:
        if ev.key == DEPLOY_KEY:
            return [(ev.namespace, ev.obj["metadata"]["name"])]
        if ev.key == RS_KEY:
            for ref in ev.obj["metadata"].get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == "Deployment":
                    return [(ev.namespace, ref["name"])]
        return ()

    def _replica_sets(self, d: dict[str, Any]) -> list[dict[str, Any]]:
        return self.store.controlled_by(RS_KEY, d["metadata"]["namespace"], d["metadata"]["uid"])

    def _scale(self, rs_rt: Any, rs: dict[str, Any], replicas: int, d: dict[str, Any]) -> dict[str, Any]:
        current = int((rs.get("spec") or {}).get("replicas", 0))
        if current == replicas:
            return rs
        new = clone(rs)
        new["spec"]["replicas"] = replicas
        ann = new["metadata"].setdefault("annotations", {})
        ann["deployment.kubernetes.io/desired-replicas"] = str(d["spec"].get("replicas", 1))
        out = self.cluster.replace(rs_rt, rs, new)
        verb = "up" if replicas > current else "down"
        self.record_event(d, "Normal", "ScalingReplicaSet",
                          f"Scaled {verb} replica set {rs['metadata']['name']} from {current} to {replicas}",
                          "deployment-controller")
        return out

    def sync(self, key: tuple[str, str]) -> float | None:
        ns, name = key
        rt = self.cluster.resource("apps", "deployments")
        rs_rt = self.cluster.resource("apps", "replicasets")
        d = self.cluster.find(rt, ns, name)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return None
        spec = d.get("spec") or {}
        desired = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        thash = template_hash(template)
        rss = self._replica_sets(d)
        new_rs = next((rs for rs in rss if strip_hash_label(rs["spec"].get("template") or {}, HASH) == template),
                      None)
        olds = [rs for rs in rss if rs is not new_rs]
        revision = max([int((rs["metadata"].get("annotations") or {}).get(REVISION, "0")) for rs in rss] or [0])
        surge = resolve_int_or_percent(((spec.get("strategy") or {}).get("rollingUpdate") or {}).get("maxSurge",
                                                                                                     "25%"),
                                       desired, True)
        unavailable = resolve_int_or_percent(((spec.get("strategy") or {}).get("rollingUpdate") or {}).get(
            "maxUnavailable", "25%"), desired, False)
        if surge == 0 and unavailable == 0:
            unavailable = 1
        recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
        if recreate:
            surge, unavailable = 0, desired
        if spec.get("paused"):
            return self._status(rt, d, new_rs, rss, desired, unavailable)
        if new_rs is None:
            old_pods = sum(int((rs.get("status") or {}).get("replicas", 0)) for rs in olds)
            if recreate and (old_pods or any(rs["spec"].get("replicas") for rs in olds)):
                for rs in olds:
                    self._scale(rs_rt, rs, 0, d)
                return self._status(rt, d, None, self._replica_sets(d), desired, unavailable)
            total = sum(int(rs["spec"].get("replicas", 0)) for rs in olds)
            start = desired if not olds else max(0, min(desired, desired + surge - total))
            body = self._new_replica_set(d, template, thash, start, revision + 1)
            new_rs = self.cluster.create(rs_rt, ns, body)
            self.record_event(d, "Normal", "ScalingReplicaSet",
                              f"Scaled up replica set {new_rs['metadata']['name']} from 0 to {start}",
                              "deployment-controller")
            rss = self._replica_sets(d)
            olds = [rs for rs in rss if rs["metadata"]["uid"] != new_rs["metadata"]["uid"]]
        elif int((new_rs["metadata"].get("annotations") or {}).get(REVISION, "0")) < revision:
            bumped = clone(new_rs)
            bumped["metadata"].setdefault("annotations", {})[REVISION] = str(revision + 1)
            new_rs = self.cluster.replace(rs_rt, new_rs, bumped)
        if not [rs for rs in olds if rs["spec"].get("replicas")]:
            new_rs = self._scale(rs_rt, new_rs, desired, d)
        else:
            total = sum(int(rs["spec"].get("replicas", 0)) for rs in [new_rs, *olds])
            new_spec = int(new_rs["spec"].get("replicas", 0))
            if new_spec < desired:
                room = desired + surge - total
                if room > 0:
                    new_rs = self._scale(rs_rt, new_rs, min(desired, new_spec + room), d)
            elif new_spec > desired:
                new_rs = self._scale(rs_rt, new_rs, desired, d)
            total = sum(int(rs["spec"].get("replicas", 0)) for rs in [new_rs, *olds])
            new_unavailable = int(new_rs["spec"].get("replicas", 0)) - int(
                (new_rs.get("status") or {}).get("availableReplicas", 0))
            budget = total - (desired - unavailable) - max(new_unavailable, 0)
            for rs in sorted(olds, key=lambda r: r["metadata"].get("creationTimestamp", "")):
                if budget <= 0:
                    break
                cur = int(rs["spec"].get("replicas", 0))
                if cur == 0:
                    continue
                cut = min(cur, budget)
                self._scale(rs_rt, rs, cur - cut, d)
                budget -= cut
        self._cleanup(rs_rt, d)
        return self._status(rt, self.cluster.find(rt, ns, name) or d, new_rs, self._replica_sets(d), desired,
                            unavailable)

    def _new_replica_set(self, d: dict[str, Any], template: dict[str, Any], thash: str, replicas: int,
                         revision: int) -> dict[str, Any]:
        tmpl = clone(template)
        tmpl.setdefault("metadata", {}).setdefault("labels", {})[HASH] = thash
        selector = clone(d["spec"].get("selector") or {})
        selector.setdefault("matchLabels", {})[HASH] = thash
        labels = dict(tmpl["metadata"]["labels"])
        return {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{d['metadata']['name']}-{thash}", "namespace": d["metadata"]["namespace"],
                         "labels": labels, "ownerReferences": [self.owner_ref(d)],
                         "annotations": {REVISION: str(revision),
                                         "deployment.kubernetes.io/desired-replicas": str(d["spec"].get("replicas",
                                                                                                        1)),
                                         "deployment.kubernetes.io/max-replicas": str(d["spec"].get("replicas", 1))}},
            "spec": {"replicas": replicas, "selector": selector, "template": tmpl,
                     "minReadySeconds": d["spec"].get("minReadySeconds", 0)},
        }

    def _cleanup(self, rs_rt: Any, d: dict[str, Any]) -> None:
        limit = int(d["spec"].get("revisionHistoryLimit", 10))
        idle = [rs for rs in self._replica_sets(d) if not rs["spec"].get("replicas")
                and not (rs.get("status") or {}).get("replicas")]
        idle.sort(key=lambda r: int((r["metadata"].get("annotations") or {}).get(REVISION, "0")))
        current = max([int((r["metadata"].get("annotations") or {}).get(REVISION, "0"))
                       for r in self._replica_sets(d)] or [0])
        idle = [r for r in idle if int((r["metadata"].get("annotations") or {}).get(REVISION, "0")) != current]
        for rs in idle[: max(0, len(idle) - limit)]:
            self.cluster.delete(rs_rt, rs["metadata"]["namespace"], rs["metadata"]["name"])

    def _status(self, rt: Any, d: dict[str, Any], new_rs: dict[str, Any] | None, rss: list[dict[str, Any]],
                desired: int, max_unavailable: int) -> float | None:
        def st(rs: dict[str, Any] | None, field: str) -> int:
            return int(((rs or {}).get("status") or {}).get(field, 0))

        replicas = sum(st(rs, "replicas") for rs in rss)
        ready = sum(st(rs, "readyReplicas") for rs in rss)
        available = sum(st(rs, "availableReplicas") for rs in rss)
        updated = st(new_rs, "replicas") if new_rs else 0
        old = d.get("status") or {}
        prev_conds = old.get("conditions") or []
        stamp = now()
        conds = []
        if available >= desired - max_unavailable:
            conds.append(condition("Available", "True", "MinimumReplicasAvailable",
                                   "Deployment has minimum availability.", stamp, prev_conds, update_time=False))
        else:
            conds.append(condition("Available", "False", "MinimumReplicasUnavailable",
                                   "Deployment does not have minimum availability.", stamp, prev_conds,
                                   update_time=False))
        rs_name = new_rs["metadata"]["name"] if new_rs else d["metadata"]["name"]
        complete = (updated == desired and replicas == desired and available == desired
                    and (not new_rs or int(new_rs["spec"].get("replicas", 0)) == desired))
        progressed = (updated, ready, available, replicas) != (old.get("updatedReplicas", 0),
                                                               old.get("readyReplicas", 0),
                                                               old.get("availableReplicas", 0),
                                                               old.get("replicas", 0)) \
            or old.get("observedGeneration") != d["metadata"].get("generation")
        prev_prog = next((c for c in prev_conds if c.get("type") == "Progressing"), None)
        deadline = int(d["spec"].get("progressDeadlineSeconds", 600))
        requeue: float | None = None
        if complete:
            conds.append(condition("Progressing", "True", "NewReplicaSetAvailable",
                                   f'ReplicaSet "{rs_name}" has successfully progressed.', stamp, prev_conds,
                                   update_time=bool(progressed or not prev_prog
                                                    or prev_prog.get("reason") != "NewReplicaSetAvailable")))
        else:
            last_progress = stamp if progressed or not prev_prog else prev_prog.get("lastUpdateTime", stamp)
            if prev_prog and prev_prog.get("reason") == "ProgressDeadlineExceeded" and not progressed:
                last_progress = prev_prog["lastUpdateTime"]
                conds.append(dict(prev_prog))
            else:
                elapsed = time.time() - parse_time(last_progress).timestamp()
                if elapsed >= deadline and not progressed:
                    conds.append(condition("Progressing", "False", "ProgressDeadlineExceeded",
                                           f'ReplicaSet "{rs_name}" has timed out progressing.', stamp, prev_conds))
                else:
                    reason = "ReplicaSetUpdated" if prev_prog else "NewReplicaSetCreated"
                    msg = (f'ReplicaSet "{rs_name}" is progressing.' if prev_prog
                           else f'Created new replica set "{rs_name}"')
                    c = condition("Progressing", "True", reason, msg, stamp, prev_conds)
                    c["lastUpdateTime"] = last_progress
                    conds.append(c)
                    requeue = max(0.2, deadline - elapsed + 0.05)
        status: dict[str, Any] = {"observedGeneration": d["metadata"].get("generation", 1), "replicas": replicas,
                                  "updatedReplicas": updated, "readyReplicas": ready,
                                  "availableReplicas": available, "conditions": conds}
        if desired - available > 0:
            status["unavailableReplicas"] = desired - available
        for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"):
            if status[k] == 0:
                del status[k]
        if old.get("collisionCount") is not None:
            status["collisionCount"] = old["collisionCount"]
        if _comparable(old) != _comparable(status):
            self.write_status(rt, d, status)
        return requeue


def _comparable(status: dict[str, Any]) -> Any:
    out = {k: v for k, v in status.items() if k != "conditions"}
    out["conditions"] = [(c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
                         for c in status.get("conditions") or []]
    return out
