"""The `Memcached` reconciler (cache.example.com/v1alpha1, namespaced), the operator-sdk tutorial's kind.

Two versions are served: v1alpha1, the storage version (`spec.size`, `spec.image`, `spec.port`), and v1beta1,
the same spec in a new shape (`spec.replicas`, and `spec.container.image` / `spec.container.port`). The CRD
converts between them by webhook (`manage.py runwebhooks`, hub and spoke through v1alpha1): an object written in
either version is stored in v1alpha1 and can be read and written back in both, so objects made before v1beta1
existed keep working. The reconciler always sees v1alpha1.

A Memcached owns a Deployment (spec.size replicas of spec.image listening on spec.port) and a Service in
front of it. Its phase says where the rollout stands:

- Pending: the rollout of the current spec is in progress (a new object, or a spec change: every change of
  `metadata.generation` goes back through Pending);
- Running: the rollout of the current spec is complete (`reconcilers.core.rollout.rollout_status`, kubectl's
  rules: every replica updated and available, no old replica left);
- Degraded: it was Running and the rollout is no longer complete (replicas lost);
- Failed: the Deployment's rollout failed (ProgressDeadlineExceeded: `spec.progressDeadlineSeconds` is the
  Deployment's own), or it was not complete within that many seconds, or a permanent error (an invalid spec);
- RollingBack: the engine restored an earlier generation's spec (a rollback) and waits for it to be Running;
- Terminating / Deleted: set by the engine around deletion.

Its status carries `phase`, `readyReplicas`, `nodes` (the names of its pods) and conditions. The spec and
status are the models below; its CRD (deploy/crds/memcached.yaml) is generated from them (`manage.py crds`).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, Field

from reconcilers.core.kind import KindModel, PrinterColumn
from reconcilers.core.meta import parse_rfc3339, rfc3339
from reconcilers.core.reconciler import Context, KindVersion, Reconciler, ResourceKind
from reconcilers.core.rollout import rollout_status
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Result
from reconcilers.kinds.names import label_value

PENDING = "Pending"
RUNNING = "Running"
DEGRADED = "Degraded"
FAILED = "Failed"
ROLLING_BACK = "RollingBack"
TERMINATING = "Terminating"
DELETED = "Deleted"

MEMCACHED = ResourceKind("cache.example.com", "v1alpha1", "memcacheds", "Memcached", namespaced=True)
DEPLOYMENT = ResourceKind("apps", "v1", "deployments", "Deployment", namespaced=True)
SERVICE = ResourceKind("", "v1", "services", "Service", namespaced=True)
POD = ResourceKind("", "v1", "pods", "Pod", namespaced=True)

MACHINE = StateMachine.build(
    "Memcached",
    states=(PENDING, RUNNING, DEGRADED, FAILED, ROLLING_BACK, TERMINATING, DELETED),
    initial=PENDING,
    transitions={
        PENDING: (RUNNING, FAILED, ROLLING_BACK, TERMINATING),
        RUNNING: (PENDING, DEGRADED, FAILED, ROLLING_BACK, TERMINATING),
        DEGRADED: (PENDING, RUNNING, FAILED, ROLLING_BACK, TERMINATING),
        FAILED: (PENDING, RUNNING, ROLLING_BACK, TERMINATING),
        ROLLING_BACK: (RUNNING, DEGRADED, FAILED, PENDING, TERMINATING),
        TERMINATING: (DELETED,),
    },
    terminal=(DELETED,),
)

DEFAULT_IMAGE = "memcached:1.6.26-alpine"
DEFAULT_PORT = 11211
DEFAULT_PROGRESS_DEADLINE = 600
# A reference as the kubelet would accept it: [registry/]path[:tag][@digest], lower-case path.
_IMAGE = re.compile(r"^[a-z0-9]+([._/-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
                    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$")
_WAITING_FAILURES = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CrashLoopBackOff",
                     "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}


def _now() -> float:
    return time.time()


def _rfc3339(ts: float) -> str:
    """A POSIX timestamp as a Kubernetes Time (seconds, UTC)."""
    return rfc3339(datetime.fromtimestamp(ts, UTC))


def _parse_rfc3339(value: Any) -> float | None:
    """An RFC 3339 timestamp as a POSIX timestamp; None for anything that is not one."""
    parsed = parse_rfc3339(value)
    return parsed.timestamp() if parsed is not None else None


def _image_reference(value: str) -> str:
    """A validator the schema does not carry (the CRD keeps any non-empty string, as it always did): a reference
    the kubelet would not pull is the reconciler's InvalidSpec, so it shows as Failed rather than refused."""
    if not _IMAGE.match(value):
        raise ValueError("not a valid image reference")
    return value


class MemcachedSpec(KindModel):
    """Memcached runs spec.size memcached replicas behind a Service."""

    size: int = Field(ge=0, le=100)
    """Number of memcached replicas."""
    image: Annotated[str, AfterValidator(_image_reference)] = Field(DEFAULT_IMAGE, min_length=1)
    """Container image."""
    port: int = Field(DEFAULT_PORT, ge=1, le=65535)
    """Port memcached listens on and the Service exposes."""
    progress_deadline_seconds: int = Field(DEFAULT_PROGRESS_DEADLINE, ge=1)
    """Seconds the rollout may take before the Memcached is Failed."""


class MemcachedStatus(KindModel):
    """What the Memcached reconciler adds to the status."""

    ready_replicas: int | None = None
    """Ready replicas of the current spec."""
    nodes: list[str] | None = None
    """The names of its pods."""
    progress_started_at: datetime | None = None
    """When the rollout in progress (or the loss of readiness) began."""


class MemcachedContainer(KindModel):
    """v1beta1: what each replica runs."""

    image: Annotated[str, AfterValidator(_image_reference)] = Field(DEFAULT_IMAGE, min_length=1)
    """Container image."""
    port: int = Field(DEFAULT_PORT, ge=1, le=65535)
    """Port memcached listens on and the Service exposes."""


class MemcachedSpecV1beta1(KindModel):
    """Memcached runs spec.replicas memcached replicas of spec.container behind a Service."""

    replicas: int = Field(ge=0, le=100)
    """Number of memcached replicas."""
    container: MemcachedContainer | None = None
    """What each replica runs (defaults: the v1alpha1 defaults)."""
    progress_deadline_seconds: int = Field(DEFAULT_PROGRESS_DEADLINE, ge=1)
    """Seconds the rollout may take before the Memcached is Failed."""


def v1beta1_to_storage(obj: dict[str, Any]) -> dict[str, Any]:
    """A v1beta1 object in v1alpha1's shape: `replicas` → `size`, `container.image/port` → `image/port`."""
    spec = dict(obj.get("spec") or {})
    container = spec.pop("container", None) or {}
    stored: dict[str, Any] = {}
    if "replicas" in spec:
        stored["size"] = spec.pop("replicas")
    stored.update({key: container[key] for key in ("image", "port") if key in container})
    stored.update(spec)  # progressDeadlineSeconds, and whatever a newer shape kept as it was
    obj["spec"] = stored
    return obj


def v1beta1_from_storage(obj: dict[str, Any]) -> dict[str, Any]:
    """A v1alpha1 object in v1beta1's shape (the inverse of `v1beta1_to_storage`: nothing is lost)."""
    spec = dict(obj.get("spec") or {})
    shaped: dict[str, Any] = {}
    if "size" in spec:
        shaped["replicas"] = spec.pop("size")
    container = {key: spec.pop(key) for key in ("image", "port") if key in spec}
    if container:
        shaped["container"] = container
    shaped.update(spec)
    obj["spec"] = shaped
    return obj


V1BETA1 = KindVersion("v1beta1", MemcachedSpecV1beta1, to_storage=v1beta1_to_storage,
                      from_storage=v1beta1_from_storage,
                      printer_columns=(PrinterColumn("Ready", ".status.readyReplicas", description="Ready replicas"),
                                       PrinterColumn("Replicas", ".spec.replicas", type="integer", priority=1)))


def selector_labels(name: str) -> dict[str, str]:
    """The labels that select one Memcached's pods (a name over 63 characters hashed to fit a label value)."""
    return {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": label_value(name)}


def child_name(name: str) -> str:
    """The name of a Memcached's Deployment and Service: its own, hashed to 63 characters when longer (a
    Service's name is a DNS label; a Deployment's pods and ReplicaSets add suffixes to it)."""
    return label_value(name)


def deployment_manifest(obj: dict[str, Any], spec: MemcachedSpec) -> dict[str, Any]:
    """The Deployment a Memcached owns."""
    meta = obj["metadata"]
    labels = {**selector_labels(meta["name"]), "app.kubernetes.io/managed-by": "opsconsole"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": child_name(meta["name"]), "namespace": meta.get("namespace", ""), "labels": labels},
        "spec": {
            "replicas": spec.size,
            # the Deployment controller marks the rollout failed (ProgressDeadlineExceeded) after this long
            # without progress: `rollout_status` reads it
            "progressDeadlineSeconds": spec.progress_deadline_seconds,
            "selector": {"matchLabels": selector_labels(meta["name"])},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{
                        "name": "memcached",
                        "image": spec.image,
                        "command": ["memcached", "-m", "64", "-o", "modern", "-p", str(spec.port)],
                        "ports": [{"name": "memcached", "containerPort": spec.port, "protocol": "TCP"}],
                    }],
                },
            },
        },
    }


def service_manifest(obj: dict[str, Any], spec: MemcachedSpec) -> dict[str, Any]:
    """The ClusterIP Service in front of a Memcached's pods."""
    meta = obj["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": child_name(meta["name"]), "namespace": meta.get("namespace", ""),
                     "labels": {**selector_labels(meta["name"]), "app.kubernetes.io/managed-by": "opsconsole"}},
        "spec": {
            "selector": selector_labels(meta["name"]),
            "ports": [{"name": "memcached", "port": spec.port, "targetPort": "memcached", "protocol": "TCP"}],
        },
    }


def _pod_problems(pods: list[dict[str, Any]]) -> list[str]:
    problems = []
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in _WAITING_FAILURES:
                detail = f" ({waiting['message']})" if waiting.get("message") else ""
                problems.append(f"pod {pod['metadata']['name']}: {waiting['reason']}{detail}")
    return problems


class MemcachedReconciler(Reconciler):
    """Runs spec.size memcached replicas behind a Service and reports how the rollout stands."""

    resource: ClassVar[ResourceKind] = MEMCACHED
    state_machine: ClassVar[StateMachine] = MACHINE
    spec_model: ClassVar[Any] = MemcachedSpec
    status_model: ClassVar[Any] = MemcachedStatus
    #: v1beta1 besides the storage version, converted by webhook
    versions: ClassVar[tuple[KindVersion, ...]] = (V1BETA1,)
    short_names: ClassVar[tuple[str, ...]] = ("mc",)
    printer_columns: ClassVar[tuple[PrinterColumn, ...]] = (
        PrinterColumn("Ready", ".status.readyReplicas", description="Ready replicas"),
        PrinterColumn("Size", ".spec.size", type="integer", priority=1),
    )
    owns: ClassVar[tuple[ResourceKind, ...]] = (DEPLOYMENT, SERVICE)
    #: kinds read but not owned (the RBAC generator grants get/list on them): the pods behind status.nodes
    rbac_reads: ClassVar[tuple[ResourceKind, ...]] = (POD,)
    ready_phases: ClassVar[tuple[str, ...]] = (RUNNING,)
    warning_phases: ClassVar[tuple[str, ...]] = (DEGRADED, ROLLING_BACK)
    #: every spec change goes back through Pending: the rollout of the new generation starts over
    spec_change_phase: ClassVar[str | None] = PENDING
    #: a rollback's restored generation is verified in RollingBack (`reconcilers.engine.healing`)
    rollback_phase: ClassVar[str | None] = ROLLING_BACK
    #: how often a rollout in progress is looked at even without an event from its Deployment
    poll_seconds: ClassVar[float] = 10.0

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        """Apply the Deployment and the Service, then derive the phase from the rollout."""
        spec: MemcachedSpec = ctx.spec
        deployment = ctx.apply_child(deployment_manifest(obj, spec))
        ctx.apply_child(service_manifest(obj, spec))
        pods = self._pods(ctx, obj)
        rollout = rollout_status(deployment)
        ready = rollout.ready

        status = obj.get("status") or {}
        phase = status.get("phase") or ""
        now = _now()
        extra: dict[str, Any] = {"readyReplicas": ready, "nodes": sorted(p["metadata"]["name"] for p in pods)}
        counts = f"{ready}/{spec.size} replicas ready"

        if rollout.complete:
            extra["progressStartedAt"] = None
            return Result(RUNNING, "AllReplicasReady", counts,
                          conditions=[ctx.condition("Available", "True", "AllReplicasReady", counts)], status=extra)
        problems = _pod_problems(pods)
        if rollout.failed:
            message = f"{counts}: {rollout.message}" + (f"; {'; '.join(problems)}" if problems else "")
            extra["progressStartedAt"] = status.get("progressStartedAt") or _rfc3339(now)
            return Result(FAILED, rollout.reason, message,
                          conditions=[ctx.condition("Available", "False", rollout.reason, rollout.message)],
                          status=extra)
        if phase == FAILED and not ctx.spec_changed:
            return Result(FAILED, status.get("reason") or "ProgressDeadlineExceeded", status.get("message") or counts,
                          conditions=[ctx.condition("Available", "False", "NotAvailable", rollout.message)],
                          status=extra)

        target = DEGRADED if phase in (RUNNING, DEGRADED) else PENDING
        # a rollback's RollingBack is the Pending of the restored generation: its rollout clock keeps running
        same = phase == target or (phase == ROLLING_BACK and target == PENDING)
        started = _parse_rfc3339(status.get("progressStartedAt")) if same else None
        if started is None or ctx.spec_changed:
            started = now
        extra["progressStartedAt"] = _rfc3339(started)
        elapsed = now - started
        deadline = float(spec.progress_deadline_seconds)
        if elapsed >= deadline:
            message = f"not available within {deadline:g}s: {counts}" + (f"; {'; '.join(problems)}" if problems else "")
            return Result(FAILED, "ProgressDeadlineExceeded", message,
                          conditions=[ctx.condition("Available", "False", "ProgressDeadlineExceeded",
                                                    rollout.message)],
                          status=extra)
        reason = "ReplicasNotReady" if target == DEGRADED else "RollingOut"
        # the condition names where the rollout stands (kubectl's words: "1 of 3 updated replicas are available")
        message = f"{counts}: {rollout.message}" + (f"; {'; '.join(problems)}" if problems else "")
        return Result(target, reason, message,
                      conditions=[ctx.condition("Available", "False", rollout.reason, rollout.message)],
                      status=extra, requeue_after=max(0.05, min(self.poll_seconds, deadline - elapsed + 0.05)))

    def _pods(self, ctx: Context, obj: dict[str, Any]) -> list[dict[str, Any]]:
        meta = obj["metadata"]
        selector = ",".join(f"{k}={v}" for k, v in sorted(selector_labels(meta["name"]).items()))
        pods = ctx.list(POD, meta.get("namespace", ""), label_selector=selector)
        return [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
