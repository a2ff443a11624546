"""What one reconcile step concludes: the `Outcome` (with its `QueueAction`), the phase change, the transitions
the record gets, the Events, an out-of-band live phase, and what the record says about healing (`HealingView`).
Plain dataclasses: no Django, Celery or Redis (the step's contract)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from reconcilers.core import actors
from reconcilers.core.meta import last_writer
from reconcilers.core.types import Condition
from reconcilers.engine.context import EngineContext


class QueueAction(Enum):
    """What the workqueue does with the key once the run is recorded."""

    FORGET = "forget"  # done until the next event: the key's failure count is reset
    REQUEUE_NOW = "requeue_now"  # run again as soon as this run ends (a step of a multi-step flow)
    REQUEUE_AFTER = "requeue_after"  # run again after `Outcome.delay` seconds (RequeueAfter); failures reset
    RETRY_AFTER = "retry_after"  # a TemporaryError: again after its `Outcome.delay`, failures kept
    BACKOFF = "backoff"  # an error or Requeue: again after the per-key exponential backoff
    KEEP = "keep"  # leave the key alone: the lease was lost and its new holder decides


@dataclass(frozen=True)
class PhaseChange:
    """The phase a reconcile concluded, with why. `actor` is 'controller', 'rollback:<who>', or, for a
    deletion, who deleted the object (`kube:<user>`, `unknown`): `reconcilers.core.actors`."""

    to_phase: str
    reason: str
    message: str
    actor: str = "controller"


@dataclass(frozen=True)
class HealingView:
    """What the record says about healing, for one run: the rollback whose restored generation is being
    verified (its transitions' actor, that generation, why) and the conditions healing keeps on the object."""

    rollback_actor: str = ""
    rollback_generation: int = 0
    rollback_message: str = ""
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class PlannedTransition:
    """One transition the record gets for a phase change, from the phase on record."""

    from_phase: str
    to_phase: str
    reason: str
    message: str


@dataclass(frozen=True)
class EventSpec:
    """A Kubernetes Event to post about the reconciled object."""

    type: str  # Normal or Warning
    reason: str
    message: str


@dataclass(frozen=True)
class OutOfBand:
    """A live phase the engine cannot prove it wrote: what was written, and what managedFields *claim* about
    who (`manager`, `operation`, `time`, `subresource` of the entry that last wrote status.phase; '' without
    one). `established_by`: the actor the API server established for it (`kube:<user>`, set by the runner from
    an admitted write), '' while only the claim is known."""

    phase: str
    reason: str
    message: str
    manager: str
    operation: str = ""
    time: str = ""
    subresource: str = ""
    established_by: str = ""

    @property
    def actor(self) -> str:
        """`kube:<user>` when admission established it, else the claim `manager:<field manager>`."""
        return self.established_by or actors.manager_claim(self.manager)


def out_of_band(obj: dict[str, Any], recorded: str | None, ours: bool = False) -> OutOfBand | None:
    """The live phase when it differs from the phase on record and the engine cannot prove it wrote it (`ours`:
    the proof, from `provenance`); None otherwise. A field manager's name proves nothing either way."""
    status = obj.get("status") or {}
    live = status.get("phase") or ""
    if not live or live == (recorded or "") or ours:
        return None
    writer = last_writer(obj, ("status", "phase")) or {}
    return OutOfBand(live, str(status.get("reason") or ""), str(status.get("message") or ""),
                     str(writer.get("manager") or ""), str(writer.get("operation") or ""),
                     str(writer.get("time") or ""), str(writer.get("subresource") or ""))


@dataclass
class Outcome:
    """What one reconcile did and concluded."""

    result: str
    obj: dict[str, Any]  # the object as written (as read when nothing was written)
    queue: QueueAction
    delay: float | None = None  # seconds, for REQUEUE_AFTER and RETRY_AFTER
    change: PhaseChange | None = None  # the phase written (None: phase, reason and message left alone)
    transitions: list[PlannedTransition] = field(default_factory=list)  # from the phase on record
    refused: bool = False  # the state machine does not allow the change from the phase on record
    events: list[EventSpec] = field(default_factory=list)
    children: list[dict[str, Any]] = field(default_factory=list)  # the children applied, as the API returned them
    token: str | None = None  # the manual-reconcile token this run handled
    token_annotation: str = ""  # the annotation that carried it
    out_of_band: OutOfBand | None = None  # a live phase the engine did not write (not proven): not built on
    written: tuple[str, str] | None = None  # (resourceVersion, phase) this run's own status write returned
    error_class: str = ""
    error_message: str = ""
    remove_finalizer: bool = False
    status_conflicts: int = 0
    ctx: EngineContext | None = field(default=None, repr=False)

    @property
    def phase(self) -> str:
        """The object's phase after the run: the one written, or the live one when nothing changed."""
        if self.change is not None:
            return self.change.to_phase
        return str((self.obj.get("status") or {}).get("phase") or "")

    @property
    def status(self) -> dict[str, Any]:
        """The object's status after the run."""
        return dict(self.obj.get("status") or {})

    @property
    def conditions(self) -> dict[str, dict[str, Any]]:
        """The object's conditions after the run, by type."""
        return {c.get("type", ""): c for c in self.status.get("conditions") or [] if isinstance(c, dict)}


@dataclass
class Decision:
    """What the reconcile concluded, before the status write."""

    result: str
    queue: QueueAction
    delay: float | None = None
    change: PhaseChange | None = None
    conditions: list[Condition] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    error_class: str = ""
    error_message: str = ""
    remove_finalizer: bool = False

