"""Contract types between the controller, the workqueue, the runner and the reconcilers.

A `Request` names an object and nothing more: reconciliation is level-based, so a reconciler always reads
the object's current state itself. A `Result` says what the reconcile concluded. Errors say how to retry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from reconcilers.core.clusters import DEFAULT_CLUSTER, key_join, key_split

ConditionStatus = Literal["True", "False", "Unknown"]


@dataclass(frozen=True, order=True)
class Request:
    """The key of one object: API group, version, resource plural, namespace ('' when cluster-scoped), name, and
    the cluster it lives in (`reconcilers.core.clusters`: DEFAULT_CLUSTER unless several clusters are watched)."""

    group: str
    version: str
    plural: str
    namespace: str
    name: str
    cluster: str = DEFAULT_CLUSTER

    def key(self) -> str:
        """The string form used in the workqueue: `group/version/plural/namespace/name` (core group is '') in the
        default cluster, `cluster/group/version/plural/namespace/name` in any other."""
        return key_join(self.cluster, self.local_key())

    def local_key(self) -> str:
        """The key within its cluster, `group/version/plural/namespace/name`, whichever cluster that is."""
        return "/".join((self.group, self.version, self.plural, self.namespace, self.name))

    @classmethod
    def from_key(cls, key: str) -> Request:
        """Parse `key()` output (either form) back into a Request; raises ValueError on anything else."""
        cluster, local = key_split(key)
        parts = local.split("/")
        if not parts[1] or not parts[2] or not parts[4]:
            raise ValueError(f"not a reconcile key: {key!r}")
        return cls(*parts, cluster=cluster)

    @property
    def namespaced_name(self) -> str:
        """`namespace/name`, or `name` for a cluster-scoped object."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def __str__(self) -> str:
        return self.key()


@dataclass(frozen=True)
class Condition:
    """A status condition following metav1.Condition (lastTransitionTime and observedGeneration are set by
    the reconcile step, which knows when the status last changed and which generation it looked at)."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""

    def __post_init__(self) -> None:
        if self.status not in ("True", "False", "Unknown"):
            raise ValueError(f"condition status must be True, False or Unknown, not {self.status!r}")
        if not self.reason or not self.reason[0].isupper() or not self.reason.replace("_", "").isalnum():
            raise ValueError(f"condition reason must be CamelCase, not {self.reason!r}")


@dataclass
class Result:
    """What one reconcile concluded.

    `phase` is the desired phase (None keeps the current one); it must be allowed by the kind's state machine.
    `status` holds extra status fields the reconciler owns (e.g. readyReplicas). `requeue_after` asks for
    another reconcile after that many seconds even without an event (controller-runtime's RequeueAfter);
    `requeue` asks for one soon, with backoff.
    """

    phase: str | None = None
    reason: str = ""
    message: str = ""
    conditions: list[Condition] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    requeue_after: float | None = None
    requeue: bool = False

    def __post_init__(self) -> None:
        if self.requeue_after is not None and self.requeue_after < 0:
            raise ValueError("requeue_after must be >= 0 seconds")


class ReconcileError(Exception):
    """Base of the errors a reconciler raises on purpose."""

    def __init__(self, message: str, *, reason: str = "ReconcileError") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


class TemporaryError(ReconcileError):
    """Retry this key after `delay` seconds (not the exponential backoff); nothing is marked Failed."""

    def __init__(self, message: str, *, delay: float = 10.0, reason: str = "TemporaryError") -> None:
        super().__init__(message, reason=reason)
        if delay < 0:
            raise ValueError("delay must be >= 0 seconds")
        self.delay = delay


class PermanentError(ReconcileError):
    """Do not retry: the object is recorded as Failed with this reason until its spec changes."""

    def __init__(self, message: str, *, reason: str = "PermanentError") -> None:
        super().__init__(message, reason=reason)
