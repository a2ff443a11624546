"""A test-only kind, `Gadget` (test.opsconsole.io/v1, namespaced), and its reconciler, registered through
settings.OPSCONSOLE_RECONCILERS by the tests that need it (in worker processes too, through the environment).

`spec.mode` says what a reconcile does: `ok` (Running), `pending` (Pending, requeue after
`spec.requeueAfter`), `permanent` (PermanentError), `temporary` (TemporaryError), `crash` (RuntimeError),
`conflict` (changes the object during the reconcile, so the status write meets a 409, once), `slow` (sleeps
`spec.sleepSeconds`, then Running); whatever the mode, a generation at or above `spec.failFromGeneration` is a
PermanentError (a spec that worked and no longer does, for the rollback tests). Every reconcile appends
`start <t> <pid>` and `end <t> <pid>` to the Redis list `gadget-trace:<uid>`, so tests can check that two
reconciles of one object never overlap. A Gadget has a
finalizer; `finalize()` needs `spec.cleanupSteps` calls before it says done.
"""

from __future__ import annotations

import os
import time
from typing import Any, ClassVar

import redis
from django.conf import settings
from pydantic import Field

from reconcilers.core.crd import crd_manifest
from reconcilers.core.kind import KindModel
from reconcilers.core.reconciler import AdmissionUser, Context, KindVersion, Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import PermanentError, Result, TemporaryError
from reconcilers.kinds.memcached import MemcachedReconciler

GADGET = ResourceKind("test.opsconsole.io", "v1", "gadgets", "Gadget", namespaced=True)
FINALIZER = "test.opsconsole.io/cleanup"


def kind_machine(name: str) -> StateMachine:
    """The state machine the test kinds share: Pending → Running ⇄ Failed, → Terminating → Deleted."""
    return StateMachine.build(
        name,
        states=("Pending", "Running", "Failed", "Terminating", "Deleted"),
        initial="Pending",
        transitions={
            "Pending": ("Running", "Failed", "Terminating"),
            "Running": ("Pending", "Failed", "Terminating"),
            "Failed": ("Pending", "Running", "Terminating"),
            "Terminating": ("Deleted",),
        },
        terminal=("Deleted",),
    )


def kind_crd(kind: ResourceKind) -> dict[str, Any]:
    """A CRD for a test kind: any spec and status, the status subresource (so status writes leave the generation
    alone)."""
    singular = kind.kind.lower()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{kind.group}"},
        "spec": {
            "group": kind.group,
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "names": {"plural": kind.plural, "singular": singular, "kind": kind.kind, "listKind": f"{kind.kind}List"},
            "versions": [{
                "name": kind.version, "served": True, "storage": True, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                }}},
            }],
        },
    }


MACHINE = kind_machine("Gadget")


def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def trace_key(uid: str) -> str:
    return f"gadget-trace:{uid}"


def trace(uid: str) -> list[tuple[str, float, int]]:
    """The start/end marks of every reconcile of the Gadget `uid`, in order."""
    out = []
    for raw in _redis().lrange(trace_key(uid), 0, -1):
        what, at, pid = raw.decode().split()
        out.append((what, float(at), int(pid)))
    return out


def overlaps(marks: list[tuple[str, float, int]]) -> int:
    """How many times a reconcile started while another one was still running."""
    running, count = 0, 0
    for what, _, _ in marks:
        if what == "start":
            count += running > 0
            running += 1
        else:
            running -= 1
    return count


class GadgetReconciler(Reconciler):
    """Does what `spec.mode` says (see the module docstring)."""

    resource: ClassVar[ResourceKind] = GADGET
    state_machine: ClassVar[StateMachine] = MACHINE
    finalizer: ClassVar[str | None] = FINALIZER

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        uid = obj["metadata"]["uid"]
        r = _redis()
        r.rpush(trace_key(uid), f"start {time.time():.6f} {os.getpid()}")
        try:
            return self._reconcile(ctx, obj, r)
        finally:
            r.rpush(trace_key(uid), f"end {time.time():.6f} {os.getpid()}")

    def _reconcile(self, ctx: Context, obj: dict[str, Any], r: redis.Redis) -> Result:
        spec = obj.get("spec") or {}
        mode = spec.get("mode", "ok")
        uid = obj["metadata"]["uid"]
        if mode == "pending":
            return Result("Pending", "Waiting", "waiting", requeue_after=float(spec.get("requeueAfter", 0.2)))
        if mode == "permanent":
            raise PermanentError("the gadget is broken for good", reason="GadgetBroken")
        if int(obj["metadata"].get("generation") or 0) >= int(spec.get("failFromGeneration") or 1 << 62):
            raise PermanentError("the gadget wore out at this generation", reason="GadgetWornOut")
        if mode == "temporary":
            raise TemporaryError("the gadget is busy", delay=float(spec.get("delay", 0.3)), reason="GadgetBusy")
        if mode == "crash":
            raise RuntimeError("the gadget exploded")
        if mode == "conflict" and r.set(f"gadget-conflicted:{uid}", "1", nx=True):
            meta = obj["metadata"]
            from reconcilers.engine import kube

            kube.patch_object(ctx.api_client, GADGET, meta["namespace"], meta["name"],
                              {"metadata": {"annotations": {"test.opsconsole.io/touched": str(time.time())}}})
        if mode == "slow":
            time.sleep(float(spec.get("sleepSeconds", 1.0)))
        return Result("Running", "Working", f"mode {mode}", status={"mode": mode},
                      conditions=[ctx.condition("Working", "True", "Working")])

    def finalize(self, ctx: Context, obj: dict[str, Any]) -> Result | None:
        steps = int((obj.get("spec") or {}).get("cleanupSteps", 1))
        done = _redis().incr(f"gadget-cleanup:{obj['metadata']['uid']}")
        if done < steps:
            return Result("Terminating", "CleaningUp", f"step {done} of {steps}", requeue_after=0.05)
        return None


class PlainGadgetReconciler(GadgetReconciler):
    """A Gadget reconciler without a finalizer."""

    finalizer: ClassVar[str | None] = None


class AdmittedMemcachedReconciler(MemcachedReconciler):
    """Memcached with admission hooks of its own (the webhook tests): `spec.port` may not change once set (a
    rule on the change), a size above 10 needs an image pinned by digest (a cross-field rule), and the user who
    created it is stamped on it (a default that depends on who asks)."""

    def validate(self, new: dict[str, Any], old: dict[str, Any] | None, user: AdmissionUser) -> list[str]:
        spec, before = new.get("spec") or {}, (old or {}).get("spec") or {}
        errors = []
        if old is not None and "port" in before and spec.get("port") != before.get("port"):
            errors.append(f"spec.port: may not change once set (was {before.get('port')})")
        if int(spec.get("size") or 0) > 10 and "@sha256:" not in str(spec.get("image") or ""):
            errors.append("spec.image: must be pinned by digest when spec.size is above 10")
        if (spec.get("image") or "").endswith(":explode"):
            raise RuntimeError("the hook exploded")
        return errors

    def mutate(self, obj: dict[str, Any], user: AdmissionUser) -> dict[str, Any]:
        annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
        annotations.setdefault("test.opsconsole.io/requested-by", user.username)
        return obj


SPROCKET = ResourceKind("test.opsconsole.io", "v1", "sprockets", "Sprocket", namespaced=True)


class SprocketSpec(KindModel):
    """v1 (the storage version): how many teeth."""

    teeth: int = Field(ge=1, le=100)
    """Number of teeth."""


class SprocketGearing(KindModel):
    """v2's shape of the same thing."""

    count: int = Field(ge=1, le=100)
    """Number of teeth."""


class SprocketSpecV2(KindModel):
    """v2: the teeth moved under spec.gearing.count."""

    gearing: SprocketGearing


def _sprocket_v2_to_storage(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    if "explode" in spec:
        raise ValueError("this sprocket cannot be converted")
    obj["spec"] = {"teeth": (spec.get("gearing") or {}).get("count")}
    return obj


def _sprocket_storage_to_v2(obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"] = {"gearing": {"count": (obj.get("spec") or {}).get("teeth")}}
    return obj


class SprocketReconciler(Reconciler):
    """A kind with two versions (the conversion tests): v1 stores `spec.teeth`, v2 says `spec.gearing.count`."""

    resource: ClassVar[ResourceKind] = SPROCKET
    state_machine: ClassVar[StateMachine] = kind_machine("Sprocket")
    spec_model: ClassVar[Any] = SprocketSpec
    versions: ClassVar[tuple[KindVersion, ...]] = (
        KindVersion("v2", SprocketSpecV2, to_storage=_sprocket_v2_to_storage, from_storage=_sprocket_storage_to_v2),
    )

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        return Result("Running", "Turning", f"{obj['spec']['teeth']} teeth")


def gadget(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "test.opsconsole.io/v1", "kind": "Gadget",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


#: the Gadget CRD, generated from the kind like any other (no models: any spec and status)
CRD: dict[str, Any] = crd_manifest(GadgetReconciler)
