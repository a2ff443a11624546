"""The `Reconciler` base class that every kind implements, and the `Context` the engine hands it.

A reconciler declares the resource it owns, its state machine, the child kinds it owns (a child's change
enqueues its owner, as controller-runtime's `Owns()`), and an optional finalizer for external state; optional
hooks with defaults say which phases are ready or warnings and what else the RBAC generator must grant.
A typed kind also declares `spec_model` (a `KindModel`): the engine validates the live spec with it before
each reconcile and hands the typed spec over as `ctx.spec`; the CRD (`manage.py crds`) is generated from the
models, the state machine and the naming declared here (`short_names`, `categories`, `printer_columns`, ...).
`reconcile(ctx, obj)` reads the live object (a dict, as the API returned it), acts, and returns a Result.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from reconcilers.core.healing import Healing
from reconcilers.core.kind import PrinterColumn, ScaleSubresource
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Condition, ConditionStatus, Request, Result


def _same(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


@dataclass(frozen=True)
class KindVersion:
    """Another served version of a kind besides its storage version (`resource.version`, the hub): its name, its
    spec model (None: any spec), and the conversion of a whole object to the storage version and back (hub and
    spoke, as kubebuilder converts: v1beta1 → storage → v2). The functions get a copy and return the object with
    its spec (and labels or annotations) in the other shape; the engine sets `apiVersion`."""

    name: str
    spec_model: Any = None
    to_storage: Callable[[dict[str, Any]], dict[str, Any]] = _same
    from_storage: Callable[[dict[str, Any]], dict[str, Any]] = _same
    deprecated: bool = False
    #: this version's own `kubectl get` columns (its fields may live elsewhere); None: the kind's
    printer_columns: tuple[PrinterColumn, ...] | None = None


@dataclass(frozen=True)
class AdmissionUser:
    """Who asks the API server for a write, as the AdmissionReview names them."""

    username: str
    groups: tuple[str, ...] = ()
    uid: str = ""

@dataclass(frozen=True)
class ResourceKind:
    """One API resource: group ('' for core), version, plural, kind, and whether it lives in a namespace."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """`group/version`, or just `version` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def request(self, namespace: str, name: str) -> Request:
        """The reconcile key of one object of this kind."""
        return Request(self.group, self.version, self.plural, namespace if self.namespaced else "", name)


class Context(Protocol):
    """What a reconciler may use while it runs; the engine provides the implementation."""

    request: Request
    #: the reconciled object as last read or written (it follows the context's own writes, e.g. finalizers)
    obj: dict[str, Any]
    #: the validated spec: an instance of the kind's `spec_model` (defaults applied), or the raw `spec` dict
    #: of a kind without one
    spec: Any
    #: whether `metadata.generation` moved since the last generation the engine handled
    #: (status.observedGeneration); False for a new object
    spec_changed: bool
    log: logging.Logger
    api_client: Any  # kubernetes.client.ApiClient
    span: Any  # opentelemetry.trace.Span

    @property
    def namespace(self) -> str:
        """The reconciled object's namespace ('' when cluster-scoped)."""
        ...

    def apply_child(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply `manifest` (the engine owns the fields it names) with a controller ownerReference to
        the reconciled object: created when missing, put back when edited, untouched when it already matches."""
        ...

    def get(self, kind: ResourceKind, namespace: str, name: str) -> dict[str, Any] | None:
        """Read one object, or None when it does not exist."""
        ...

    def list(
        self,
        kind: ResourceKind,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """The objects of `kind` in `namespace` (all namespaces when None or '') matching the selectors
        (`a=b,c=d`, as the API takes them)."""
        ...

    def delete(self, kind: ResourceKind, namespace: str, name: str) -> bool:
        """Delete one object; False when it was already gone."""
        ...

    def list_children(self, kind: ResourceKind) -> list[dict[str, Any]]:
        """The objects of `kind` that the reconciled object owns (by ownerReference uid)."""
        ...

    def add_finalizer(self, name: str) -> None:
        """Add a finalizer to the reconciled object (no-op when present)."""
        ...

    def remove_finalizer(self, name: str) -> None:
        """Remove a finalizer from the reconciled object (no-op when absent)."""
        ...

    def event(self, type_: str, reason: str, message: str) -> None:
        """Post a Kubernetes Event about the reconciled object (type_ is Normal or Warning)."""
        ...

    def condition(self, type_: str, status: ConditionStatus, reason: str, message: str = "") -> Condition:
        """Build a Condition (the reconcile step stamps times and generation)."""
        ...


#: the semantic classes a phase may have (`Reconciler.phase_class`)
PHASE_CLASSES = ("ready", "progressing", "warning", "failed", "terminal")


class Reconciler(ABC):
    """Base class of a reconciler: subclass it as `<Kind>Reconciler` in `reconcilers/kinds/<kind>.py`."""

    resource: ClassVar[ResourceKind]
    state_machine: ClassVar[StateMachine]
    owns: ClassVar[tuple[ResourceKind, ...]] = ()
    finalizer: ClassVar[str | None] = None
    #: phases the engine sets itself around deletion, when the kind declares them
    terminating_phase: ClassVar[str] = "Terminating"
    deleted_phase: ClassVar[str] = "Deleted"
    failed_phase: ClassVar[str] = "Failed"

    # -- optional hooks: a kind overrides them when the defaults do not fit ---------------------------------

    #: phases in which the object is ready: the kstatus `Ready` condition is True in them (and False otherwise)
    ready_phases: ClassVar[tuple[str, ...]] = ("Running", "Ready")
    #: phases besides `failed_phase` whose transitions into them are posted as Warning Events (others: Normal)
    warning_phases: ClassVar[tuple[str, ...]] = ("Degraded",)
    #: the semantic class of a phase (one of `PHASE_CLASSES`: ready, progressing, warning, failed, terminal) where
    #: the derived one does not fit (`phase_class`); the console colours badges and diagram states by it
    phase_classes: ClassVar[dict[str, str]] = {}
    #: kinds the reconciler reads but does not own (e.g. Memcached's Pods): the RBAC generator grants
    #: `get`/`list` on them
    rbac_reads: ClassVar[tuple[ResourceKind, ...]] = ()
    #: ClusterRoles the RoleBindings it creates reference: the RBAC generator grants `bind` on exactly these
    #: (the apiserver refuses a binding unless its creator may bind the role); required when it owns bindings
    rbac_binds: ClassVar[tuple[str, ...]] = ()
    #: the phase every spec change goes through (e.g. "Pending": a rollout starts over): when the generation
    #: moved and the reconcile concludes another phase (except the failed one), the engine records this phase
    #: (reason SpecChanged) and runs the key again at once, so a scale-up never reads as Running → Degraded
    spec_change_phase: ClassVar[str | None] = None
    #: anomaly rules and automatic rollback (`reconcilers.core.healing`); the defaults: the settings' rules, no
    #: automatic rollback
    healing: ClassVar[Healing] = Healing()
    #: the phase a resource is in while a rollback's restored generation is verified (e.g. "RollingBack"), when
    #: the kind's state machine declares it; without one the rollback shows in conditions and healing records
    rollback_phase: ClassVar[str | None] = None
    #: how often each object is reconciled again without an event (the periodic resync, spread evenly over the
    #: period): None → OPSCONSOLE_RESYNC_SECONDS (10 h), 0 → never; a kind that must poll something outside
    #: Kubernetes says so here (one object's next run: `Result(requeue_after=...)`)
    resync_seconds: ClassVar[float | None] = None
    #: service level objectives on the time in a phase (`reconcilers.core.objectives.PhaseObjective`); none
    #: declared: the initial phase left within 5 minutes, 99 % of the time (`objectives.default_objectives`)
    objectives: ClassVar[tuple[Any, ...]] = ()

    # -- typed kinds: the models and what the generated CRD says besides them -------------------------------

    #: the spec as a pydantic model (a `reconcilers.core.kind.KindModel`); None: the spec is not validated and
    #: the CRD keeps any spec (x-kubernetes-preserve-unknown-fields)
    spec_model: ClassVar[Any] = None
    #: the reconciler's own status fields (those it returns in `Result.status`) as a model; None: the CRD keeps
    #: any status field
    status_model: ClassVar[Any] = None
    short_names: ClassVar[tuple[str, ...]] = ()
    categories: ClassVar[tuple[str, ...]] = ("opsconsole",)
    #: `kubectl get` columns besides Phase (first), Reason (-o wide) and Age (last), which every kind gets
    printer_columns: ClassVar[tuple[PrinterColumn, ...]] = ()
    #: the scale subresource, when the kind has replicas
    scale: ClassVar[ScaleSubresource | None] = None
    #: other served versions (each with its model and conversion); the generated CRD converts by webhook
    #: (`manage.py runwebhooks` serves `/convert/<group>/<plural>`)
    versions: ClassVar[tuple[KindVersion, ...]] = ()

    @property
    def name(self) -> str:
        """The controller name used in metrics labels and logs: the kind, lower-cased."""
        return self.resource.kind.lower()

    def phase_class(self, phase: str) -> str:
        """The semantic class of `phase`: its entry in `phase_classes`, else derived: `ready_phases` → ready,
        `failed_phase` → failed, `warning_phases` → warning, the state machine's terminal states → terminal,
        any other phase → progressing."""
        if phase in self.phase_classes:
            return self.phase_classes[phase]
        if phase in self.ready_phases:
            return "ready"
        if phase == self.failed_phase:
            return "failed"
        if phase in self.warning_phases:
            return "warning"
        machine = getattr(self, "state_machine", None)
        if machine is not None and phase in machine.terminal:
            return "terminal"
        return "progressing"

    @abstractmethod
    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        """Bring the world in line with `obj`'s spec and say where it stands. Must be idempotent."""

    def finalize(self, ctx: Context, obj: dict[str, Any]) -> Result | None:
        """Clean up external state of an object being deleted. Return a Result with requeue/requeue_after
        while cleanup is still in progress, or None when it is done (the engine then removes the finalizer)."""
        return None

    # -- admission (the validating and mutating webhooks of `manage.py runwebhooks`) ------------------------

    def validate(self, new: dict[str, Any], old: dict[str, Any] | None, user: AdmissionUser) -> list[str]:
        """The kind's own admission rules beyond its spec model (cross-field rules, rules on a change from
        `old`, None on create), for the Kubernetes `user` who asks: each broken rule as a message naming its
        field (`spec.size: may not shrink below 2`); [] admits. Called after the spec model validated."""
        return []

    def mutate(self, obj: dict[str, Any], user: AdmissionUser) -> dict[str, Any]:
        """The object as it should be stored: defaults that depend on more than the spec model (the cluster,
        the user). Return a changed copy; the mutating webhook sends the difference as a JSONPatch. The
        object unchanged by default."""
        return obj
