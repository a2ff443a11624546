"""Kubelet simulation: Pods the scheduler bound to an existing node start and become Ready after delays.

A running Pod annotated ``kubesim.io/ready: "false"`` turns not Ready (Ready and ContainersReady False, reason
ContainersNotReady, a ``Warning Unhealthy`` Event), as a failing readiness probe makes it; removing the
annotation (or any other value) makes it Ready again after ``ready_delay``.

Images whose tag contains a broken marker cycle as the real kubelet's pulls do: ErrImagePull, a short pause,
ImagePullBackOff, then after a backoff delay (``image_pull_backoff`` doubling up to ``image_pull_backoff_max``)
another failed pull, until the Pod's image is changed or the Pod goes. A crash marker gives CrashLoopBackOff with a
growing restartCount. Repeated Events aggregate (``Controller.record_event``). Failed or Succeeded Pods are left
alone.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Hashable, Iterable
from typing import Any

from kubesim.cluster.options import WriteOptions
from kubesim.controllers.base import Controller
from kubesim.controllers.workloads import set_pod_condition as _set_cond
from kubesim.meta import clone, now
from kubesim.nodes import host_ip
from kubesim.store import Event

POD_KEY = ("", "pods")
NODE_KEY = ("", "nodes")
#: the readiness switch: a running Pod with this annotation set to "false" turns (and stays) not Ready
READY_ANNOTATION = "kubesim.io/ready"
_ips = itertools.count(2)


def _tag(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1].lower() if ":" in last else "latest"


class Kubelet(Controller):
    """One step per Pod; ``self.since`` remembers when a Pod entered its current stage, ``self.pulls`` how many
    image pulls of its current images have failed."""

    name = "kubelet"

    def __init__(self, sim: Any) -> None:
        super().__init__(sim)
        self.opts = sim.options.kubelet
        self.since: dict[tuple[str, str], float] = {}
        self.pulls: dict[tuple[str, str], int] = {}

    def initial_keys(self) -> Iterable[Hashable]:
        return [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.store.items(POD_KEY)]

    def keys_for(self, ev: Event) -> Iterable[Hashable]:
        if ev.key != POD_KEY:
            return ()
        if ev.type == "DELETED":
            uid = ev.obj["metadata"]["uid"]
            for k in [k for k in self.since if k[0] == uid]:
                del self.since[k]
            for k in [k for k in self.pulls if k[0] == uid]:
                del self.pulls[k]
            return ()
        return [(ev.namespace, ev.obj["metadata"]["name"])]

    def _image_state(self, image: str) -> str:
        tag = _tag(image)
        if any(m.lower() in tag for m in self.opts.broken_image_markers):
            return "broken"
        if any(m.lower() in tag for m in self.opts.crash_image_markers):
            return "crash"
        return "ok"

    def _wait(self, pod: dict[str, Any], stage: str, delay: float) -> float | None:
        """Seconds still to wait in ``stage`` (None when the delay has passed)."""
        key = (pod["metadata"]["uid"], stage)
        started = self.since.setdefault(key, time.monotonic())
        left = delay - (time.monotonic() - started)
        return left if left > 0 else None

    def pull_backoff(self, attempt: int) -> float:
        """Seconds in ImagePullBackOff after the ``attempt``-th failed pull (1-based)."""
        return min(self.opts.image_pull_backoff * 2 ** min(attempt - 1, 62), self.opts.image_pull_backoff_max)

    def sync(self, key: tuple[str, str]) -> float | None:
        ns, name = key
        rt = self.cluster.resource("", "pods")
        pod = self.cluster.find(rt, ns, name)
        if pod is None:
            return None
        if pod["metadata"].get("deletionTimestamp"):
            if pod["metadata"].get("deletionGracePeriodSeconds"):
                left = self._wait(pod, "terminate", self.opts.terminate_delay)
                if left is not None:
                    return left
                self.cluster.delete(rt, ns, name, {"gracePeriodSeconds": 0})
            return None
        status = pod.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            return None
        spec = pod.get("spec") or {}
        node = self.store.get(NODE_KEY, "", spec.get("nodeName") or "") if spec.get("nodeName") else None
        if node is None:
            return None  # not bound yet (the scheduler's job), or bound to a node that is gone (pod GC's)
        containers = spec.get("containers") or []
        statuses = {s["name"]: s for s in status.get("containerStatuses") or []}
        started = all(statuses.get(c["name"], {}).get("image") == c.get("image") for c in containers)
        if not started:
            stage = "start:" + ",".join(c.get("image", "") for c in containers)
            left = self._wait(pod, stage, self.opts.start_delay)
            if left is not None:
                return left
            return self._start(rt, pod, node)
        states = [self._image_state(c.get("image", "")) for c in containers]
        if "broken" in states:
            return self._pull_cycle(rt, pod, containers, statuses)
        if "crash" in states:
            left = self._wait(pod, f"crash:{sum(s.get('restartCount', 0) for s in statuses.values())}",
                              max(self.opts.start_delay * 2, 0.2))
            if left is not None:
                return left
            return self._crash(rt, pod)
        if not wants_ready(pod):
            return self._unready(rt, pod) if any(s.get("ready") for s in statuses.values()) else None
        if not all(s.get("ready") for s in statuses.values()):
            stage = "ready:" + ",".join(c.get("image", "") for c in containers)
            left = self._wait(pod, stage, self.opts.ready_delay)
            if left is not None:
                return left
            return self._ready(rt, pod)
        return None

    def _pull_cycle(self, rt: Any, pod: dict[str, Any], containers: list[dict[str, Any]],
                    statuses: dict[str, dict[str, Any]]) -> float | None:
        images = ",".join(c.get("image", "") for c in containers)
        attempt = self.pulls.get((pod["metadata"]["uid"], images), 1)
        reasons = {(statuses.get(c["name"], {}).get("state") or {}).get("waiting", {}).get("reason")
                   for c in containers}
        if "ErrImagePull" in reasons:
            left = self._wait(pod, f"pulled:{images}:{attempt}", max(self.opts.start_delay, 0.05))
            if left is not None:
                return left
            return self._image_backoff(rt, pod, images, attempt)
        if "ImagePullBackOff" in reasons:
            left = self._wait(pod, f"backoff:{images}:{attempt}", self.pull_backoff(attempt))
            if left is not None:
                return left
            return self._pull_again(rt, pod, images, attempt)
        return None

    # ---- transitions ----------------------------------------------------------------------------------
    def _container_status(self, c: dict[str, Any], state: dict[str, Any], ready: bool, restarts: int = 0,
                          last: dict[str, Any] | None = None) -> dict[str, Any]:
        s = {"name": c["name"], "image": c.get("image", ""),
             "imageID": f"docker.io/library/{c.get('image', '')}@sha256:{'0' * 64}",
             "containerID": f"containerd://{c['name']}-{restarts}", "ready": ready, "restartCount": restarts,
             "started": "running" in state, "state": state, "lastState": last or {}}
        return s

    def _start(self, rt: Any, pod: dict[str, Any], node: dict[str, Any]) -> float | None:
        stamp = now()
        new = clone(pod)
        st = new.setdefault("status", {})
        st.setdefault("hostIP", host_ip(node))
        st.setdefault("hostIPs", [{"ip": st["hostIP"]}])
        if not st.get("podIP"):
            n = next(_ips)
            st["podIP"] = f"10.244.{n // 250}.{n % 250 + 1}"
            st["podIPs"] = [{"ip": st["podIP"]}]
        st.setdefault("startTime", stamp)
        old = {s["name"]: s for s in st.get("containerStatuses") or []}
        uid = pod["metadata"]["uid"]
        for k in [k for k in self.pulls if k[0] == uid]:
            del self.pulls[k]
        for k in [k for k in self.since if k[0] == uid and k[1].startswith(("pulled:", "backoff:"))]:
            del self.since[k]
        statuses, broken = [], []
        for c in pod["spec"].get("containers") or []:
            kind = self._image_state(c.get("image", ""))
            restarts = old.get(c["name"], {}).get("restartCount", 0)
            if kind == "broken":
                broken.append(c)
                statuses.append(self._container_status(c, _pull_failed(c.get("image", "")), False, restarts))
            else:
                statuses.append(self._container_status(c, {"running": {"startedAt": stamp}}, False, restarts))
        st["containerStatuses"] = statuses
        st["phase"] = "Pending" if broken else "Running"
        conds = st.get("conditions")
        conds = _set_cond(conds, "PodReadyToStartContainers", "True")
        conds = _set_cond(conds, "Initialized", "True")
        reason = "ContainersNotReady"
        msg = "containers with unready status: [" + " ".join(c["name"] for c in pod["spec"]["containers"]) + "]"
        conds = _set_cond(conds, "Ready", "False", reason, msg)
        conds = _set_cond(conds, "ContainersReady", "False", reason, msg)
        conds = _set_cond(conds, "PodScheduled", "True")
        st["conditions"] = conds
        self.cluster.replace(rt, pod, new, subresource="status", opts=WriteOptions(field_manager="kubelet"))
        for c in broken:
            self._pull_events(new, c.get("image", ""))
        if not broken:
            self.record_event(new, "Normal", "Started", "Started container "
                              + ",".join(c["name"] for c in pod["spec"]["containers"]), "kubelet")
        return 0.0

    def _pull_events(self, pod: dict[str, Any], image: str) -> None:
        self.record_event(pod, "Normal", "Pulling", f'Pulling image "{image}"', "kubelet")
        self.record_event(pod, "Warning", "Failed", f'Failed to pull image "{image}": not found', "kubelet")
        self.record_event(pod, "Warning", "Failed", "Error: ErrImagePull", "kubelet")

    def _image_backoff(self, rt: Any, pod: dict[str, Any], images: str, attempt: int) -> float | None:
        new = clone(pod)
        backing_off = []
        for s in new["status"].get("containerStatuses") or []:
            if (s.get("state") or {}).get("waiting", {}).get("reason") == "ErrImagePull":
                s["state"] = {"waiting": {"reason": "ImagePullBackOff",
                                          "message": f'Back-off pulling image "{s.get("image")}"'}}
                backing_off.append(s.get("image", ""))
        self.cluster.replace(rt, pod, new, subresource="status", opts=WriteOptions(field_manager="kubelet"))
        uid = pod["metadata"]["uid"]
        self.since.pop((uid, f"pulled:{images}:{attempt}"), None)
        self.since[(uid, f"backoff:{images}:{attempt}")] = time.monotonic()
        for image in backing_off:
            self.record_event(new, "Normal", "BackOff", f'Back-off pulling image "{image}"', "kubelet")
            self.record_event(new, "Warning", "Failed", "Error: ImagePullBackOff", "kubelet")
        return self.pull_backoff(attempt)

    def _pull_again(self, rt: Any, pod: dict[str, Any], images: str, attempt: int) -> float | None:
        new = clone(pod)
        pulled = []
        for s in new["status"].get("containerStatuses") or []:
            if (s.get("state") or {}).get("waiting", {}).get("reason") == "ImagePullBackOff":
                s["state"] = _pull_failed(s.get("image", ""))
                pulled.append(s.get("image", ""))
        self.cluster.replace(rt, pod, new, subresource="status", opts=WriteOptions(field_manager="kubelet"))
        uid = pod["metadata"]["uid"]
        self.since.pop((uid, f"backoff:{images}:{attempt}"), None)
        self.pulls[(uid, images)] = attempt + 1
        for image in pulled:
            self._pull_events(new, image)
        return max(self.opts.start_delay, 0.05)

    def _crash(self, rt: Any, pod: dict[str, Any]) -> float | None:
        stamp = now()
        new = clone(pod)
        for s in new["status"].get("containerStatuses") or []:
            s["restartCount"] = int(s.get("restartCount", 0)) + 1
            s["ready"] = False
            s["started"] = False
            s["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": stamp,
                                             "finishedAt": stamp}}
            s["state"] = {"waiting": {"reason": "CrashLoopBackOff",
                                      "message": f"back-off restarting failed container {s['name']}"}}
        self.cluster.replace(rt, pod, new, subresource="status", opts=WriteOptions(field_manager="kubelet"))
        self.record_event(new, "Warning", "BackOff", "Back-off restarting failed container", "kubelet")
        return max(self.opts.start_delay * 2, 0.2)

    def _unready(self, rt: Any, pod: dict[str, Any]) -> float | None:
        """The readiness switch is off: the containers keep running but report not ready (a failing probe)."""
        new = clone(pod)
        st = new["status"]
        for s in st.get("containerStatuses") or []:
            s["ready"] = False
        reason = "ContainersNotReady"
        msg = "containers with unready status: [" + " ".join(c["name"] for c in pod["spec"]["containers"]) + "]"
        st["conditions"] = _set_cond(_set_cond(st.get("conditions"), "ContainersReady", "False", reason, msg),
                                     "Ready", "False", reason, msg)
        self.cluster.replace(rt, pod, new, subresource="status", opts=WriteOptions(field_manager="kubelet"))
        images = ",".join(c.get("image", "") for c in pod["spec"].get("containers") or [])
        self.since.pop((pod["metadata"]["uid"], "ready:" + images), None)  # Ready again only after ready_delay
        self.record_event(new, "Warning", "Unhealthy", "Readiness probe failed: kubesim.io/ready is \"false\"",
                          "kubelet")
        return None

    def _ready(self, rt: Any, pod: dict[str, Any]) -> float | None:
        new = clone(pod)
        st = new["status"]
        for s in st.get("containerStatuses") or []:
            s["ready"] = True
            s["started"] = True
        st["conditions"] = _set_cond(_set_cond(st.get("conditions"), "ContainersReady", "True"), "Ready", "True")
        self.cluster.replace(rt, pod, new, subresource="status", opts=WriteOptions(field_manager="kubelet"))
        return None


def wants_ready(pod: dict[str, Any]) -> bool:
    """False while the Pod carries the readiness switch ``kubesim.io/ready: "false"``."""
    return ((pod["metadata"].get("annotations") or {}).get(READY_ANNOTATION) or "").lower() != "false"


def _pull_failed(image: str) -> dict[str, Any]:
    return {"waiting": {"reason": "ErrImagePull",
                        "message": f'failed to pull and unpack image "{image}": not found'}}
