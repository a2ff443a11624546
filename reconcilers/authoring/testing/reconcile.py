"""`reconcile_once` / `reconcile_until`: the engine's real reconcile step on a real (sandbox) API, no database.

`Reconciling(api, kinds, namespace)` finds the kind's reconciler by the object's apiVersion + kind, creates the
object when it does not exist (in the test's namespace when the kind is namespaced and the manifest names
none) or writes the spec it is given when that changed (`specs.SpecWriter`: as `kubectl apply` does), reads it
live, runs `reconcilers.engine.step.reconcile_step` and then `step.complete` (Events, finalizer
removal), and returns the `Outcome`. The phase "on record" that the runner would read from its database is
kept per object uid instead: the last planned transition's `to_phase`, passed as `recorded` to the next run of
the same object. `update_spec(obj, **changes)` merge-patches the live spec (and `obj`'s). A spec the API server
refuses raises `specs.SpecRejected` naming the fields. No Django, Redis or Celery is involved.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

from reconcilers.authoring.testing.kinds import find_kind
from reconcilers.authoring.testing.specs import SpecWriter
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine.step import Outcome, QueueAction, complete, reconcile_step

MAX_SLEEP = 0.5  # reconcile_until never sleeps longer than this between runs
POLL = 0.05  # its sleep when the outcome asks for no requeue (waiting for the cluster to move)


class Reconciling:
    """One test's reconciles: the reconciler instances, the phases on record by uid, the default namespace."""

    def __init__(
        self,
        api: Any,
        kinds: Sequence[type[Reconciler]],
        namespace: Callable[[], str],
        ensure_crds: Callable[[Sequence[type[Reconciler]]], object] | None = None,
    ) -> None:
        self.api = api
        self.kinds = list(kinds)
        self.namespace = namespace  # called only when a namespaced object names none
        self.ensure_crds = ensure_crds
        self.recorded: dict[str, str] = {}  # uid → the phase on record
        self.outcomes: list[Outcome] = []
        self.specs = SpecWriter(api)
        self._reconcilers: dict[type[Reconciler], Reconciler] = {}

    def reconciler_for(self, obj: dict[str, Any]) -> Reconciler:
        """The (one per test) instance of the kind under test that reconciles `obj`."""
        cls = find_kind(self.kinds, str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
        if cls not in self._reconcilers:
            if self.ensure_crds is not None:
                self.ensure_crds([cls])
            self._reconcilers[cls] = cls()
        return self._reconcilers[cls]

    def manifest(self, obj: dict[str, Any], reconciler: Reconciler) -> dict[str, Any]:
        """`obj` with the test's namespace filled in when the kind is namespaced and it names none."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if reconciler.resource.namespaced and not meta.get("namespace"):
            meta["namespace"] = self.namespace()
        return obj

    def once(self, obj: dict[str, Any]) -> Outcome:
        """Create `obj` if missing (else write its spec when it differs from the one given last), read it live, run
        the reconcile step and `complete`; the Outcome. SpecRejected when the API server refuses the spec."""
        reconciler = self.reconciler_for(obj)
        live = self.specs.live(reconciler.resource, self.manifest(obj, reconciler))
        uid = live["metadata"]["uid"]
        outcome = reconcile_step(reconciler, self.api, live, self.recorded.get(uid))
        if outcome.transitions:
            self.recorded[uid] = outcome.transitions[-1].to_phase
        complete(outcome)
        self.outcomes.append(outcome)
        return outcome

    def update_spec(self, obj: dict[str, Any], **changes: Any) -> dict[str, Any]:
        """Merge-patch `changes` (spec fields as the object names them, camelCase; None removes one) into the live
        object's spec and into `obj["spec"]`; the live object. SpecRejected when the API server refuses them."""
        reconciler = self.reconciler_for(obj)
        manifest = self.manifest(obj, reconciler)
        live = self.specs.update(reconciler.resource, manifest, changes)
        obj["spec"] = manifest["spec"]
        return live

    def until(self, obj: dict[str, Any], phase: str, timeout: float = 10.0) -> Outcome:
        """`once` again and again until the outcome's phase is `phase`, sleeping the requeue delay (at most
        `MAX_SLEEP`) or a short poll in between; AssertionError with the last outcome otherwise."""
        deadline = time.monotonic() + timeout
        runs = 0
        while True:
            outcome = self.once(obj)
            runs += 1
            if outcome.phase == phase:
                return outcome
            if time.monotonic() >= deadline:
                raise AssertionError(f"{describe(outcome)} did not reach phase {phase!r} within {timeout:g} s "
                                     f"({runs} reconciles); last: {summary(outcome)}")
            time.sleep(max(0.0, min(pause(outcome), deadline - time.monotonic())))


def pause(outcome: Outcome) -> float:
    """How long `reconcile_until` waits before the next run after `outcome`."""
    if outcome.queue is QueueAction.REQUEUE_NOW:
        return 0.0
    if outcome.queue in (QueueAction.REQUEUE_AFTER, QueueAction.RETRY_AFTER) and outcome.delay is not None:
        return min(max(outcome.delay, 0.0), MAX_SLEEP)
    return POLL


def describe(outcome: Outcome) -> str:
    """`Kind namespace/name` of the outcome's object."""
    meta = outcome.obj.get("metadata") or {}
    where = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
    return f"{outcome.obj.get('kind')} {where}"


def summary(outcome: Outcome) -> str:
    """The outcome's phase, reason and message (and error, when there was one)."""
    status = outcome.status
    text = (f"phase {outcome.phase!r}, reason {status.get('reason')!r}, message {status.get('message')!r}, "
            f"result {outcome.result}")
    if outcome.error_class:
        text += f", error {outcome.error_class}: {outcome.error_message}"
    return text
