"""Simulated control plane: controllers running as asyncio tasks next to the API server."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubesim.simulator import Simulator

log = logging.getLogger("kubesim.controllers")


class ControllerManager:
    """Starts and stops the simulated controllers."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.tasks: list[asyncio.Task] = []
        self.controllers: list = []

    def build(self) -> list:
        """The controllers, in the order they are started."""
        from kubesim.controllers.deployment import DeploymentController
        from kubesim.controllers.disruption import DisruptionController
        from kubesim.controllers.gc import GarbageCollector
        from kubesim.controllers.kubelet import Kubelet
        from kubesim.controllers.namespaces import (
            CRDCleanupController,
            NamespaceController,
            ServiceAccountController,
        )
        from kubesim.controllers.nodes import NodeController
        from kubesim.controllers.replicaset import ReplicaSetController
        from kubesim.controllers.scheduler import Scheduler
        from kubesim.controllers.statefulset import StatefulSetController

        sim = self.sim
        return [GarbageCollector(sim), NamespaceController(sim), ServiceAccountController(sim),
                CRDCleanupController(sim), DeploymentController(sim), ReplicaSetController(sim),
                StatefulSetController(sim), DisruptionController(sim), NodeController(sim), Scheduler(sim),
                Kubelet(sim)]

    def get(self, name: str) -> object | None:
        """The running controller called ``name``."""
        return next((c for c in self.controllers if getattr(c, "name", None) == name), None)

    def start(self) -> None:
        """Start every controller's loop."""
        self.controllers = self.build()
        for c in self.controllers:
            self.tasks.append(asyncio.get_running_loop().create_task(c.run(), name=type(c).__name__))

    async def stop(self) -> None:
        """Cancel the loops and wait for them."""
        for t in self.tasks:
            t.cancel()
        for t in self.tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass
            except Exception:  # noqa: BLE001
                log.exception("controller %s failed", t.get_name())
        self.tasks.clear()
