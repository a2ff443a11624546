"""An engine of one fault test's own, for faults that must not reach the rest of the session (a Redis restarted,
the database cut off): its own kubesim (so no other engine of the session watches its CRs or contends for its
Lease), two workers and a controller on it, this test process's settings and ApiClient pointed at it.

    with isolated_engine(django_db_blocker, settings, prefix="test-faults-x", extra_env={...}) as iso:
        iso.engine, iso.kubesim, iso.api, iso.namespace
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kubesim.testing import KubesimHandle
from reconcilers.engine import apiclient, kube, registry
from tests.faults.conftest import BACKOFF_BASE, BACKOFF_CAP
from tests.fixtures.cluster import NAMESPACE, kubesim_with_crds
from tests.fixtures.engines import INTEGRATION_RECONCILERS, Engine, engine_running


@dataclass
class Isolated:
    engine: Engine
    kubesim: KubesimHandle
    api: Any
    namespace: str

    def led(self) -> bool:
        """Whether the controller has taken the Lease (its informers run)."""
        return "started leading" in self.engine.controller.log_path.read_text(errors="replace")

    def exit_codes(self) -> dict[str, int | None]:
        """Process → exit code (None: still running) of the controller and every worker main process."""
        procs = {"controller": self.engine.controller.proc, **{w.name: w.proc for w in self.engine.workers}}
        return {name: proc.poll() if proc is not None else -1 for name, proc in procs.items()}


@contextmanager
def isolated_engine(django_db_blocker: Any, settings: Any, *, prefix: str,
                    extra_env: dict[str, str]) -> Iterator[Isolated]:
    """The engine (fault backoff, `extra_env` on top) on a kubesim of its own; stopped at the end, before the
    caller checks the audit trail and the database is emptied."""
    settings.OPSCONSOLE_RECONCILERS = INTEGRATION_RECONCILERS
    settings.OPSCONSOLE_WORKQUEUE_BACKOFF_BASE = BACKOFF_BASE
    settings.OPSCONSOLE_WORKQUEUE_BACKOFF_CAP = BACKOFF_CAP
    registry.reset()
    env = {"OPSCONSOLE_WORKQUEUE_BACKOFF_BASE": str(BACKOFF_BASE),
           "OPSCONSOLE_WORKQUEUE_BACKOFF_CAP": str(BACKOFF_CAP), **extra_env}
    try:
        with kubesim_with_crds() as sim:
            settings.KUBECONFIG = sim.kubeconfig
            apiclient.reset()
            api = apiclient.get_api_client()
            namespace = f"t-{uuid.uuid4().hex[:8]}"
            kube.create_object(api, NAMESPACE, {"metadata": {"name": namespace}})
            with engine_running(sim, django_db_blocker, prefix=prefix, extra_env=env) as engine:
                settings.OPSCONSOLE_WORKQUEUE_NAME = engine.queue_name
                isolated = Isolated(engine, sim, api, namespace)
                deadline = time.monotonic() + 30
                while not isolated.led():
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the controller did not lead; log:\n{engine.controller.log()}")
                    time.sleep(0.05)
                yield isolated
                engine.stop()
    finally:
        apiclient.reset()
        registry.reset()
