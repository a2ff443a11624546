"""The `KVStore` reconciler (stateful.example.com/v1alpha1, namespaced): a replicated key-value store on a
StatefulSet that upgrades with zero downtime, gated by its PodDisruptionBudget and spread across zones.

A KVStore owns a headless Service, a StatefulSet (`spec.replicas` ordinal Pods of `spec.image`, spread over
`spec.zoneSpread.topologyKey` with `whenUnsatisfiable: DoNotSchedule`, `updateStrategy: RollingUpdate` with a
partition it controls) and a PodDisruptionBudget (`spec.minAvailable`, a number or a percentage). A budget that
can never be met (minAvailable ≥ replicas) is refused at admission with the reason.

A template change (a new image) is an upgrade, one step per reconcile (`reconcilers.core.ordered_upgrade`): the
partition is raised to `replicas` with the new template, then lowered one ordinal at a time from the highest, each
only when the PDB allows a disruption and the ordinals moved so far are Ready on the new revision with the spread
holding. The partition on the live StatefulSet is where the upgrade stands: a worker killed mid-step resumes from
it, and each ordinal's move is one transition on record (into Replacing, its message `ordinal N: ...`).

Phases: Pending (first rollout) → Running; Running → Upgrading (template changed) → Replacing (ordinal moved) →
Upgrading (ordinal verified) → … → Running; Upgrading/Replacing ↔ Blocked (budget exhausted, spread unsatisfiable,
the moved ordinal not Ready within `progressDeadlineSeconds`; a Warning Event with each), which resumes by itself
when the cause clears; Failed on an invalid spec. Status: readyReplicas, partition, revisions, disruptionsAllowed
and per ordinal its Pod's revision, readiness and zone (the console's rollout view).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, Field

from reconcilers.core import ordered_upgrade as ou
from reconcilers.core.kind import KindModel, PrinterColumn
from reconcilers.core.meta import parse_rfc3339, rfc3339
from reconcilers.core.reconciler import AdmissionUser, Context, Reconciler, ResourceKind
from reconcilers.core.rollout import rollout_status
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import PermanentError, Result
from reconcilers.kinds.kvstore_manifests import (
    TEMPLATE_HASH,
    child_name,
    pdb_manifest,
    pod_template,
    selector_labels,
    service_manifest,
    statefulset_manifest,
    template_hash,
)
from reconcilers.kinds.memcached import _image_reference

PENDING, RUNNING, UPGRADING, REPLACING, BLOCKED = "Pending", "Running", "Upgrading", "Replacing", "Blocked"
FAILED, TERMINATING, DELETED = "Failed", "Terminating", "Deleted"
UPGRADE_PHASES = (UPGRADING, REPLACING, BLOCKED)

KVSTORE = ResourceKind("stateful.example.com", "v1alpha1", "kvstores", "KVStore", namespaced=True)
STATEFULSET = ResourceKind("apps", "v1", "statefulsets", "StatefulSet", namespaced=True)
SERVICE = ResourceKind("", "v1", "services", "Service", namespaced=True)
PDB = ResourceKind("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)
POD = ResourceKind("", "v1", "pods", "Pod", namespaced=True)
NODE = ResourceKind("", "v1", "nodes", "Node", namespaced=False)

MACHINE = StateMachine.build(
    "KVStore",
    states=(PENDING, RUNNING, UPGRADING, REPLACING, BLOCKED, FAILED, TERMINATING, DELETED),
    initial=PENDING,
    transitions={
        PENDING: (RUNNING, UPGRADING, FAILED, TERMINATING),
        RUNNING: (PENDING, UPGRADING, FAILED, TERMINATING),
        UPGRADING: (REPLACING, BLOCKED, RUNNING, FAILED, TERMINATING),
        REPLACING: (UPGRADING, BLOCKED, RUNNING, FAILED, TERMINATING),
        BLOCKED: (UPGRADING, REPLACING, RUNNING, FAILED, TERMINATING),
        FAILED: (PENDING, RUNNING, UPGRADING, TERMINATING),
        TERMINATING: (DELETED,),
    },
    terminal=(DELETED,),
)

DEFAULT_IMAGE = "redis:7.2.5-alpine"


def _now() -> float:
    return time.time()


class ZoneSpread(KindModel):
    """How the Pods spread over a topology domain (a Pod that would break it stays Pending)."""

    max_skew: int = Field(1, ge=1, le=100)
    """The most the number of Pods in two zones may differ by."""
    topology_key: str = Field(ou.ZONE_KEY, min_length=1, max_length=316)
    """The Node label whose values are the zones."""
    min_domains: int | None = Field(None, ge=1, le=100)
    """The zones there must be (e.g. 3): with fewer (a zone lost its Nodes) a Pod stays Pending rather than pack
    the zones left, and the upgrade is Blocked (SpreadUnsatisfiable)."""


class KVStoreSpec(KindModel):
    """KVStore runs spec.replicas replicas of a key-value store across zones, upgraded within its budget."""

    replicas: int = Field(3, ge=0, le=100)
    """Number of replicas (ordinals 0..replicas-1)."""
    image: Annotated[str, AfterValidator(_image_reference)] = Field(DEFAULT_IMAGE, min_length=1)
    """Container image; a change is an ordered upgrade."""
    port: int = Field(6379, ge=1, le=65535)
    """Port each replica listens on."""
    min_available: int | str = Field(2)
    """Pods that must stay Ready: a number, or a percentage such as '80%' (rounded up); below replicas."""
    zone_spread: ZoneSpread = Field(default_factory=ZoneSpread)
    """The zone spread of the Pods."""
    progress_deadline_seconds: int = Field(600, ge=1)
    """Seconds a moved ordinal's new Pod may take to be Ready before the upgrade is Blocked."""


class OrdinalStatus(KindModel):
    """One ordinal of the StatefulSet."""

    ordinal: int
    pod: str
    revision: str = ""
    updated: bool = False
    ready: bool = False
    zone: str = ""
    node: str = ""
    unschedulable: str | None = None


class KVStoreStatus(KindModel):
    """What the KVStore reconciler adds to the status."""

    ready_replicas: int | None = None
    """Ready Pods."""
    partition: int | None = None
    """The StatefulSet's partition: ordinals at or above it run the new revision."""
    current_revision: str | None = None
    """The revision the ordinals below the partition run."""
    update_revision: str | None = None
    """The revision being rolled out."""
    disruptions_allowed: int | None = None
    """The PodDisruptionBudget's allowed disruptions."""
    ordinals: list[OrdinalStatus] | None = None
    """Per ordinal: its Pod's revision, readiness and zone."""
    step_ordinal: int | None = None
    """The ordinal moved last."""
    step_started_at: datetime | None = None
    """When the ordinal moved last was first seen moving (for the progress deadline)."""


def _stamp(ts: float) -> str:
    return rfc3339(datetime.fromtimestamp(ts, UTC))


class KVStoreReconciler(Reconciler):
    """Runs a KVStore's StatefulSet and upgrades it one ordinal at a time within its budget and spread."""

    resource: ClassVar[ResourceKind] = KVSTORE
    state_machine: ClassVar[StateMachine] = MACHINE
    spec_model: ClassVar[Any] = KVStoreSpec
    status_model: ClassVar[Any] = KVStoreStatus
    short_names: ClassVar[tuple[str, ...]] = ("kvs",)
    printer_columns: ClassVar[tuple[PrinterColumn, ...]] = (
        PrinterColumn("Ready", ".status.readyReplicas", description="Ready replicas"),
        PrinterColumn("Partition", ".status.partition", type="integer", description="StatefulSet partition"),
        PrinterColumn("Replicas", ".spec.replicas", type="integer", priority=1),
    )
    owns: ClassVar[tuple[ResourceKind, ...]] = (STATEFULSET, SERVICE, PDB)
    #: the Pods (revision, readiness) and Nodes (zones) the upgrade is judged on
    rbac_reads: ClassVar[tuple[ResourceKind, ...]] = (POD, NODE)
    ready_phases: ClassVar[tuple[str, ...]] = (RUNNING,)
    #: a transition into Blocked posts a Warning Event
    warning_phases: ClassVar[tuple[str, ...]] = (BLOCKED,)
    #: a spec change is judged by the reconcile itself (an upgrade, a scale), not sent through one phase
    spec_change_phase: ClassVar[str | None] = None
    poll_seconds: ClassVar[float] = 2.0

    def validate(self, new: dict[str, Any], old: dict[str, Any] | None, user: AdmissionUser) -> list[str]:
        """A budget that could never be met is refused (minAvailable ≥ replicas)."""
        spec = new.get("spec") or {}
        problem = ou.budget_problem(spec.get("minAvailable", 2), int(spec.get("replicas", 3)))
        return [f"spec.minAvailable: {problem}"] if problem else []

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        """Apply the Service, the PDB and the StatefulSet (at the partition the upgrade stands at) and say where
        the rollout or the upgrade stands."""
        spec: KVStoreSpec = ctx.spec
        problem = ou.budget_problem(spec.min_available, spec.replicas)
        if problem:
            raise PermanentError(f"spec.minAvailable: {problem}", reason="InvalidSpec")
        ns, name = obj["metadata"].get("namespace", ""), child_name(obj["metadata"]["name"])
        status = obj.get("status") or {}
        phase = status.get("phase") or ""
        key = spec.zone_spread.topology_key
        ctx.apply_child(service_manifest(obj, spec))
        pdb = ctx.apply_child(pdb_manifest(obj, spec))
        live = ctx.get(STATEFULSET, ns, name)
        pods = self._pods(ctx, obj)
        nodes = ctx.list(NODE)
        want = template_hash(pod_template(obj, spec))
        if live is not None and (live["metadata"].get("annotations") or {}).get(TEMPLATE_HASH) != want \
                and any(s.ready for s in ou.ordinal_states(live, pods, nodes, key)):
            # a new template over Ready Pods: hold every ordinal at the old revision, then move one at a time
            sts = ctx.apply_child(statefulset_manifest(obj, spec, spec.replicas))
            return Result(UPGRADING, "UpgradeStarted",
                          f"template changed: ordinals {spec.replicas - 1}..0 upgrade one at a time",
                          status=self._extra(sts, pdb, ou.ordinal_states(sts, pods, nodes, key)), requeue_after=0.1)
        partition = ou.partition_of(live) if live is not None else 0
        if live is None or (partition == 0 and phase not in UPGRADE_PHASES):
            sts = ctx.apply_child(statefulset_manifest(obj, spec, 0))
            return self._rollout(ctx, sts, pdb, ou.ordinal_states(sts, pods, nodes, key))
        step_ordinal = status.get("stepOrdinal")
        started = parse_rfc3339(status.get("stepStartedAt"))
        now = _now()
        elapsed = now - started.timestamp() if started is not None and step_ordinal == partition else 0.0
        verified = phase == UPGRADING or (phase == BLOCKED and status.get("reason") == ou.BUDGET_EXHAUSTED)
        plan = ou.plan_upgrade(live, pods, pdb, nodes, min_available=spec.min_available,
                               max_skew=spec.zone_spread.max_skew, topology_key=key, verified=verified,
                               step_elapsed=elapsed, deadline=float(spec.progress_deadline_seconds))
        if partition < spec.replicas and step_ordinal != partition:
            # the partition moved and the status does not say so: the run that moved it died before its status
            # write. Its step goes on record now, once, whatever its Pod has done since; the next run goes on
            sts = ctx.apply_child(statefulset_manifest(obj, spec, partition))
            extra = {**self._extra(sts, pdb, plan.ordinals), "stepOrdinal": partition, "stepStartedAt": _stamp(now)}
            return Result(REPLACING, "OrdinalMoved", f"ordinal {partition}: found moved to the partition (the run "
                          f"that moved it left no record)", status=extra, requeue_after=0.05,
                          conditions=[ctx.condition("UpgradeBlocked", "False", "NotBlocked")])
        sts = ctx.apply_child(statefulset_manifest(obj, spec, plan.partition))
        extra = self._extra(sts, pdb, plan.ordinals)
        if plan.action == ou.STEP:
            extra.update(stepOrdinal=plan.partition, stepStartedAt=_stamp(now))
        return self._upgrade_result(ctx, plan, phase, step_ordinal, extra)

    def _upgrade_result(self, ctx: Context, plan: ou.UpgradePlan, phase: str, step_ordinal: Any,
                        extra: dict[str, Any]) -> Result:
        """The phase a plan puts the KVStore in: each ordinal's move is the one transition into Replacing with
        reason OrdinalMoved."""
        if plan.action == ou.DONE:
            extra.update(stepOrdinal=None, stepStartedAt=None)
            return Result(RUNNING, plan.reason, plan.message,
                          conditions=[ctx.condition("Available", "True", plan.reason, plan.message),
                                      ctx.condition("UpgradeBlocked", "False", "NotBlocked")], status=extra)
        if plan.action == ou.BLOCKED:
            return Result(BLOCKED, plan.reason, plan.message,
                          conditions=[ctx.condition("UpgradeBlocked", "True", plan.reason, plan.message)],
                          status=extra, requeue_after=self.poll_seconds)
        unblocked = [ctx.condition("UpgradeBlocked", "False", "NotBlocked")]
        if plan.action == ou.STEP or (plan.action == ou.WAIT and plan.reason == "OrdinalMoved"):
            # back from Blocked to an ordinal whose move is on record already: not a step of its own
            reason = "Resumed" if phase == BLOCKED and plan.action == ou.WAIT and step_ordinal == plan.ordinal \
                else "OrdinalMoved"
            return Result(REPLACING, reason, plan.message, conditions=unblocked, status=extra, requeue_after=0.2)
        if plan.action == ou.VERIFIED:
            return Result(UPGRADING, plan.reason, plan.message, conditions=unblocked, status=extra,
                          requeue_after=0.05)
        held = phase if phase in (UPGRADING, REPLACING) else UPGRADING  # a status lagging: stay where it is
        return Result(held, plan.reason, plan.message, status=extra, requeue_after=0.2)

    def _rollout(self, ctx: Context, sts: dict[str, Any], pdb: dict[str, Any],
                 states: tuple[ou.OrdinalState, ...]) -> Result:
        """No upgrade in progress: Running once the StatefulSet's rollout is complete, else Pending."""
        rollout = rollout_status(sts)
        extra = self._extra(sts, pdb, states)
        counts = f"{rollout.ready}/{rollout.desired} replicas ready"
        if rollout.complete:
            return Result(RUNNING, "AllReplicasReady", counts,
                          conditions=[ctx.condition("Available", "True", "AllReplicasReady", counts)], status=extra)
        return Result(PENDING, rollout.reason, f"{counts}: {rollout.message}",
                      conditions=[ctx.condition("Available", "False", rollout.reason, rollout.message)],
                      status=extra, requeue_after=self.poll_seconds)

    @staticmethod
    def _extra(sts: dict[str, Any], pdb: dict[str, Any], states: tuple[ou.OrdinalState, ...]) -> dict[str, Any]:
        st = sts.get("status") or {}
        return {"readyReplicas": sum(1 for s in states if s.ready), "partition": ou.partition_of(sts),
                "currentRevision": st.get("currentRevision"), "updateRevision": st.get("updateRevision"),
                "disruptionsAllowed": int((pdb.get("status") or {}).get("disruptionsAllowed") or 0),
                "ordinals": [s.as_status() for s in states]}

    def _pods(self, ctx: Context, obj: dict[str, Any]) -> list[dict[str, Any]]:
        selector = ",".join(f"{k}={v}" for k, v in sorted(selector_labels(obj["metadata"]["name"]).items()))
        return ctx.list(POD, obj["metadata"].get("namespace", ""), label_selector=selector)
