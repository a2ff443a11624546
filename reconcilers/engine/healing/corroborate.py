"""Corroboration: whether the Events an anomaly counted agree with the state the children's own controllers wrote.

Anyone who may create Events in a namespace can write Events about a Memcached's Pods, so an `events` rule about
children (`involved` children or any) is not, alone, reason to roll a change back. Before such an anomaly is
raised, or when it is judged again because its evidence grew, the Pods the counted Events are about (at most
MAX_PODS; they were attributed to the current generation, so they belong to its ReplicaSet) are read through the
API, and the anomaly may roll back (`rollback_ok`) only when one of them is actually waiting in ImagePullBackOff,
ErrImagePull or CrashLoopBackOff, or its restartCount rose since the last judgment. What was read is part of the
evidence. Nothing else reads Pods: a step with no anomaly to raise or judge makes no API call here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube

#: the waiting reasons the kubelet writes for a change that cannot run
WAITING = ("ImagePullBackOff", "ErrImagePull", "CrashLoopBackOff")
#: how many of the evidence's Pods are read
MAX_PODS = 5
POD = ResourceKind("", "v1", "pods", "Pod", namespaced=True)

PodReader = Callable[[str, str], dict[str, Any] | None]


def pod_reader(api: Any) -> PodReader:
    """Read one Pod (namespace, name) through the API: None when it is not there."""
    def read(namespace: str, name: str) -> dict[str, Any] | None:
        return kube.get_object(api, POD, namespace, name, timeout=(2.0, 5.0))
    return read


def corroborate(events: Sequence[Mapping[str, Any]], read: PodReader | None,
                previous: Mapping[str, int] | None = None) -> dict[str, Any]:
    """{corroborated, why, pods: [{name, uid, found, waiting, restarts, rising}], restarts: {uid: n}} for the Pods
    `events` (counted evidence rows: involved_kind, involved_namespace, involved_name, involved_uid) are about;
    `previous` holds the restart counts of the last judgment."""
    pods: dict[str, tuple[str, str]] = {}
    for row in events:
        if row.get("involved_kind") == "Pod" and row.get("involved_uid") and len(pods) < MAX_PODS:
            pods.setdefault(str(row["involved_uid"]), (str(row.get("involved_namespace") or ""),
                                                        str(row.get("involved_name") or "")))
    if not pods:
        return {"corroborated": False, "why": "no Pod among the counted Events", "pods": [], "restarts": {}}
    if read is None:
        return {"corroborated": False, "why": "the Pods could not be read (no API client)", "pods": [],
                "restarts": {}}
    found: list[dict[str, Any]] = []
    restarts: dict[str, int] = {}
    for uid, (namespace, name) in pods.items():
        try:
            obj = read(namespace, name)
        except kube.ApiException as exc:
            found.append({"name": name, "uid": uid, "found": False, "error": f"HTTP {exc.status}"})
            continue
        meta = (obj or {}).get("metadata") or {}
        if obj is None or meta.get("uid") != uid:
            found.append({"name": name, "uid": uid, "found": False})
            continue
        status = obj.get("status") or {}
        statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
        waiting = sorted({str(((s.get("state") or {}).get("waiting") or {}).get("reason") or "") for s in statuses}
                         & set(WAITING))
        count = sum(int(s.get("restartCount") or 0) for s in statuses)
        restarts[uid] = count
        rising = previous is not None and uid in previous and count > int(previous[uid])
        found.append({"name": name, "uid": uid, "found": True, "waiting": waiting, "restarts": count,
                      "rising": rising, "deleting": bool(meta.get("deletionTimestamp"))})
    ok = any(p.get("waiting") or p.get("rising") for p in found)
    why = "" if ok else (f"none of the {len(found)} Pod(s) the Events are about is waiting in "
                         f"{'/'.join(WAITING)} or restarting")
    return {"corroborated": ok, "why": why, "pods": found, "restarts": restarts}
