"""What a `Controller` runs, built: the collaborators `wiring.build_controller` hands it."""

from __future__ import annotations

from dataclasses import dataclass

from reconcilers.engine.controller.archive import EventsArchive
from reconcilers.engine.controller.feed import QueueFeed
from reconcilers.engine.controller.gauges import QueueGauges
from reconcilers.engine.controller.handoff import Handoff
from reconcilers.engine.controller.informers import InformerSet
from reconcilers.engine.controller.kindmap import KindMap
from reconcilers.engine.controller.mirror import MirrorWriter
from reconcilers.engine.controller.periodic import CheckpointStep, HealingStep
from reconcilers.engine.controller.routing import EventRouter
from reconcilers.engine.controller.standby import StandbyGate
from reconcilers.engine.controller.sweep import Sweeps


@dataclass
class ControllerParts:
    """The collaborators a `Controller` runs, built by `wiring.build_controller`. `archive` is None when the
    Events archive is off; `standby` is None for a cold standby;
    `object_cache`: the informers feed the object cache the workers read."""

    kinds: KindMap
    handoff: Handoff
    informers: InformerSet
    router: EventRouter
    feed: QueueFeed
    gauges: QueueGauges
    mirror: MirrorWriter
    sweeps: Sweeps
    archive: EventsArchive | None
    healing: HealingStep
    checkpoint: CheckpointStep
    object_cache: bool
    #: the gate of a hot standby (None: a cold one, whose informers start when it acquires the Lease)
    standby: StandbyGate | None = None
