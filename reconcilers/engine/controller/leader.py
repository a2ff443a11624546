"""Leader election through a coordination.k8s.io/v1 Lease, as client-go's leaderelection package does it.

A candidate acquires the Lease when it is free (no holder) or expired, a leader renews it every retry
period, and every write is a PUT carrying the resourceVersion that was read, so of two candidates racing
for one Lease exactly one write succeeds (the other gets 409). Expiry is judged on this process's monotonic
clock from when it last *observed* the record change (never by comparing another host's renewTime with our
wall clock), over the holder's leaseDurationSeconds.

A leader stops leading when it has not renewed successfully within the renew deadline, measured from
*before* its last successful request: the Lease was written after that instant, so any other candidate,
which waits a full lease duration from when it saw that write, cannot take over before we stopped
(renew deadline < lease duration). `is_leader` is computed from the clock on every read, so a leader whose
loop stalls stops being leader on time even without running another step.
"""

from __future__ import annotations

import logging
import math
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from reconcilers.core.meta import rfc3339
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube, supervise
from reconcilers.engine.metrics import LEADER_ELECTION_MASTER

log = logging.getLogger(__name__)

LEASE = ResourceKind("coordination.k8s.io", "v1", "leases", "Lease", True)
LEASE_NAME = "opsconsole-controller"


def default_identity() -> str:
    """hostname_pid_random, unique per process (as client-go's examples build it)."""
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


class LeaderElector:
    """One candidate for the Lease `name` in `namespace`. Drive it with `step()` every `retry_period`
    (or `run()` in a thread); read `is_leader`; `release()` on a clean exit."""

    def __init__(
        self,
        api: Any,
        *,
        identity: str | None = None,
        name: str = LEASE_NAME,
        namespace: str = "default",
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self.api = api
        self.identity = identity or default_identity()
        self.name = name
        self.namespace = namespace
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.wall_clock = wall_clock
        # every Lease request must end well within the renew deadline
        read = max(0.2, renew_deadline / 2)
        self.request_timeout = (min(5.0, read), read)

        self._step_lock = threading.Lock()  # one step or release at a time
        self._lock = threading.Lock()  # the state below; never held during a request
        self._leading = False
        self._renewed_at = -math.inf  # monotonic instant before the last successful write
        self._observed_rv: str | None = None
        self._observed_at = -math.inf  # monotonic instant we saw the record change
        self._observed_spec: dict[str, Any] = {}
        self._next_step_at = -math.inf
        self._stop = threading.Event()
        self._thread: supervise.Supervised | None = None
        #: annotations written into the Lease with every acquire or renewal (a shard's view of the membership)
        self.annotations: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"<LeaderElector {self.namespace}/{self.name} as {self.identity}>"

    # -- state ---------------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """True while we hold the Lease and renewed it within the renew deadline (any thread)."""
        with self._lock:
            if self._leading and self.clock() - self._renewed_at >= self.renew_deadline:
                self._set_leading(False, "renew deadline passed")
            return self._leading

    @property
    def holder(self) -> str:
        """The holder identity in the last Lease record we observed ('' when free or never seen)."""
        return str(self._observed_spec.get("holderIdentity") or "")

    def _set_leading(self, leading: bool, why: str) -> None:
        """Change the state (call with self._lock held)."""
        if leading == self._leading:
            return
        self._leading = leading
        LEADER_ELECTION_MASTER.labels(self.name).set(1 if leading else 0)
        log.info("%r: %s leading (%s)", self, "started" if leading else "stopped", why)

    def _step_down(self, why: str) -> None:
        with self._lock:
            self._set_leading(False, why)

    # -- one step ------------------------------------------------------------------------------------------

    @property
    def next_step_at(self) -> float:
        """The monotonic instant the next step is due."""
        return self._next_step_at

    def due(self) -> bool:
        """Whether a step is due (the loop calls step() when it is)."""
        return self.clock() >= self._next_step_at

    def step(self) -> bool:
        """Try to acquire or renew once; returns whether we lead afterwards."""
        with self._step_lock:
            try:
                self._try_acquire_or_renew()
            except Exception as exc:  # any failure (HTTP, connection, bad answer) is retried next step
                log.warning("%r: lease request failed: %s", self, exc)
            leading = self.is_leader
            period = self.retry_period if leading else self.retry_period * (1 + 0.2 * random.random())
            self._next_step_at = self.clock() + period
            return leading

    def _observe(self, lease: dict[str, Any]) -> None:
        rv = str(lease["metadata"].get("resourceVersion") or "")
        with self._lock:
            if rv != self._observed_rv:
                self._observed_rv = rv
                self._observed_spec = dict(lease.get("spec") or {})
                self._observed_at = self.clock()

    def _spec(self, previous: dict[str, Any], *, acquiring: bool) -> dict[str, Any]:
        now = rfc3339(self.wall_clock(), micro=True)
        transitions = int(previous.get("leaseTransitions") or 0)
        if acquiring and previous.get("holderIdentity") and previous.get("holderIdentity") != self.identity:
            transitions += 1
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.lease_duration)),
            "acquireTime": now if acquiring else previous.get("acquireTime") or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _try_acquire_or_renew(self) -> None:
        started = self.clock()
        timeout = self.request_timeout
        lease = kube.get_object(self.api, LEASE, self.namespace, self.name, timeout=timeout)
        if lease is None:
            body = {
                "apiVersion": LEASE.api_version,
                "kind": LEASE.kind,
                "metadata": {"name": self.name, "namespace": self.namespace,
                             **({"annotations": dict(self.annotations)} if self.annotations else {})},
                "spec": self._spec({}, acquiring=True),
            }
            try:
                created = kube.create_object(self.api, LEASE, body, timeout=timeout)
            except kube.ApiException as exc:
                if exc.status == 409:  # another candidate created it first
                    return
                raise
            self._won(created, started)
            return

        self._observe(lease)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        ours = holder == self.identity
        if holder and not ours:
            self._step_down(f"the lease is held by {holder}")
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if self.clock() < self._observed_at + duration:
                return  # held and not expired
        elif not holder:
            self._step_down("the lease was released")
        # free, expired, or ours (renewing; or naming us after we stepped down or restarted with the same
        # identity): take it through a conditional write, which fails if anyone wrote since we read
        body = {
            "apiVersion": LEASE.api_version,
            "kind": LEASE.kind,
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "resourceVersion": lease["metadata"]["resourceVersion"],
                **({"annotations": dict(self.annotations)} if self.annotations else {}),
            },
            "spec": self._spec(spec, acquiring=not (ours and self._leading)),
        }
        try:
            updated = kube.replace_object(self.api, LEASE, body, timeout=timeout)
        except kube.ApiException as exc:
            if exc.status == 409:  # someone wrote it since we read it: look again next step
                return
            raise
        self._won(updated, started)

    def _won(self, lease: dict[str, Any], started: float) -> None:
        self._observe(lease)
        with self._lock:
            self._renewed_at = started
            if self.clock() - started < self.renew_deadline:  # a write that took too long does not count
                self._set_leading(True, "acquired")

    # -- release and the thread ----------------------------------------------------------------------------

    def release(self) -> bool:
        """Give the Lease up if we hold it (holder cleared, so another candidate takes it at once)."""
        with self._step_lock:
            with self._lock:
                was_leading = self._leading
                self._set_leading(False, "released")
                self._renewed_at = -math.inf
            if not was_leading:
                return False
            try:
                lease = kube.get_object(self.api, LEASE, self.namespace, self.name, timeout=self.request_timeout)
                if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                    return False
                now = rfc3339(self.wall_clock(), micro=True)
                spec = dict(lease.get("spec") or {})
                spec.update(holderIdentity="", leaseDurationSeconds=1, acquireTime=now, renewTime=now)
                body = {**lease, "spec": spec}
                kube.replace_object(self.api, LEASE, body, timeout=self.request_timeout)
            except Exception as exc:  # the lease then expires on its own
                log.warning("%r: could not release the lease: %s", self, exc)
                return False
            return True

    def run(self) -> None:
        """Step every retry period until stopped, then release."""
        while not self._stop.is_set():
            self.step()
            self._stop.wait(max(0.0, self._next_step_at - self.clock()))
        self.release()

    def start(self) -> LeaderElector:
        """Run in a supervised daemon thread (`reconcilers.engine.supervise`: started again if it dies)."""
        self._stop.clear()
        self._thread = supervise.start("leader-elector", self.run)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread (which releases the Lease)."""
        if self._thread is not None:
            self._thread.signal_stop()  # first: the run ending now is no death
        self._stop.set()
        if self._thread is not None:
            self._thread.stop(timeout)
