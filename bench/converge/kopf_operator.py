"""A kopf operator for Memcached running opsconsole's reconcile step for `MemcachedReconciler` (the rival).

Run it as `kopf run --standalone --all-namespaces -m bench.converge.kopf_operator` with `KUBECONFIG` set and
`BENCH_KOPF_LOG` naming the file where every reconcile appends one line
`<start unix time> <duration s> <result> <key>` (the benchmark reads it for event → reconcile start).

It keeps controller-runtime's (and opsconsole's) semantics, so that both sides do the same work:

- level-based `@kopf.on.event` handlers (kopf's cheapest path: no progress or diff-base annotations) on
  Memcached and on the owned Deployments and Services;
- the same event filters as opsconsole's controller (`reconcilers.engine.controller.events`): a Memcached
  enqueues on add, generation, deletion/finalizer or manual-annotation change, not on status-only updates;
  a child's real change enqueues its controller owner (`Owns()`);
- one reconcile per key at a time; an event for a key being reconciled marks it dirty and it is
  reconciled once more when the run ends (coalescing);
- RequeueAfter and retry backoff through a delayed set (earliest due time wins; a new event cancels it).

Each reconcile is `reconcilers.engine.step.reconcile_step` + `complete`, exactly what opsconsole's runner calls
(the reconcile, the status write with its 409 re-read, kstatus conditions, an Event per phase change, the
finalizer), with the live status as the phase on record: what kopf does not get is the database record
(ReconcileRun, Transition, mirror), the Redis workqueue and the leases. That is the difference measured.

Sync handlers run in kopf's default thread pool (`ThreadPoolExecutor()`: min(32, CPUs + 4) threads).
kopf's own Event posting of log messages is off; Events are posted per phase change, as opsconsole does.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf

from reconcilers.engine import kube, step
from reconcilers.engine.controller.events import (
    ADDED,
    DELETED,
    InformerEvent,
    child_changed,
    owner_keys,
    primary_wants_reconcile,
)
from reconcilers.kinds.memcached import DEPLOYMENT, MEMCACHED, SERVICE, MemcachedReconciler

log = logging.getLogger("bench.converge.kopf")

BACKOFF_BASE = 0.005
BACKOFF_CAP = 1000.0

RECONCILER = MemcachedReconciler()
_api: Any = None
_api_lock = threading.Lock()


def api() -> Any:
    """The kubernetes ApiClient the reconciles use (built once from KUBECONFIG, pooled like the engine's)."""
    global _api
    with _api_lock:
        if _api is None:
            _api = kube.build_api_client(os.environ["KUBECONFIG"])
        return _api


def backoff(failures: int) -> float:
    """controller-runtime's per-key exponential backoff (5 ms · 2^n, capped at 1000 s), as the workqueue's."""
    return min(BACKOFF_CAP, BACKOFF_BASE * 2 ** min(failures, 1023))


def reconcile_once(obj: dict[str, Any], failures: int) -> tuple[step.Outcome, float | None]:
    """One reconcile through opsconsole's step; the outcome and when to look again (None: not until an event).
    The live status is the phase on record: kopf keeps no record of its own."""
    recorded = (obj.get("status") or {}).get("phase") or None
    outcome = step.complete(step.reconcile_step(RECONCILER, api(), obj, recorded))
    if outcome.queue in (step.QueueAction.REQUEUE_AFTER, step.QueueAction.RETRY_AFTER):
        return outcome, outcome.delay
    if outcome.queue is step.QueueAction.BACKOFF:
        return outcome, backoff(failures)
    if outcome.queue is step.QueueAction.REQUEUE_NOW:
        return outcome, 0.0
    return outcome, None


class RunLog:
    """Appends one line per reconcile to BENCH_KOPF_LOG."""

    def __init__(self, path: str | None) -> None:
        self.lock = threading.Lock()
        self.file = open(path, "a", buffering=1) if path else None  # noqa: SIM115 - process lifetime

    def write(self, start: float, duration: float, result: str, key: str) -> None:
        if self.file is not None:
            with self.lock:
                self.file.write(f"{start:.6f} {duration:.6f} {result} {key}\n")


class Gate:
    """One reconcile per key at a time with coalescing, plus a delayed set for RequeueAfter and backoff."""

    def __init__(self, runlog: RunLog) -> None:
        self.runlog = runlog
        self.lock = threading.Condition()
        self.running: set[str] = set()
        self.dirty: set[str] = set()
        self.failures: dict[str, int] = {}
        self.due: dict[str, float] = {}
        self.heap: list[tuple[float, str]] = []
        self.timer_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="requeue")
        threading.Thread(target=self._timers, name="delayed", daemon=True).start()

    # -- entry points --------------------------------------------------------------------------------------

    def submit(self, key: str, obj: dict[str, Any] | None) -> None:
        """Reconcile `key` now in this thread (with `obj` as read, or a fresh GET when None), unless it is
        being reconciled: then it is marked dirty and reconciled again when that run ends."""
        with self.lock:
            self.due.pop(key, None)  # an event supersedes a pending RequeueAfter (the workqueue's add())
            if key in self.running:
                self.dirty.add(key)
                return
            self.running.add(key)
        try:
            while True:
                self._run(key, obj)
                with self.lock:
                    if key not in self.dirty:
                        self.running.discard(key)  # under the lock: an event now starts a new run
                        return
                    self.dirty.discard(key)
                obj = None
        except BaseException:
            with self.lock:
                self.running.discard(key)
            raise

    def forget(self, key: str) -> None:
        """The object is gone: drop its delayed entry and failure count."""
        with self.lock:
            self.due.pop(key, None)
            self.failures.pop(key, None)

    # -- internals -----------------------------------------------------------------------------------------

    def _run(self, key: str, obj: dict[str, Any] | None) -> None:
        start = time.time()
        t0 = time.monotonic()
        result = "success"
        try:
            if obj is None:
                parts = key.split("/")
                obj = kube.get_object(api(), MEMCACHED, parts[3] or None, parts[4])
                if obj is None:
                    self.forget(key)
                    return
            outcome, again = reconcile_once(obj, self.failures.get(key, 0))
            result = outcome.result
            with self.lock:
                if outcome.result == "error":
                    self.failures[key] = self.failures.get(key, 0) + 1
                    log.warning("%s: %s: %s", key, outcome.error_class, outcome.error_message)
                else:
                    self.failures.pop(key, None)
            if again is not None:
                self._add_after(key, again)
        except Exception:
            result = "error"
            log.exception("reconcile of %s failed", key)
        finally:
            self.runlog.write(start, time.monotonic() - t0, result, key)

    def _add_after(self, key: str, delay: float) -> None:
        due = time.monotonic() + max(0.0, delay)
        with self.lock:
            current = self.due.get(key)
            if current is not None and current <= due:
                return
            self.due[key] = due
            heapq.heappush(self.heap, (due, key))
            self.lock.notify()

    def _timers(self) -> None:
        while True:
            with self.lock:
                while not self.heap:
                    self.lock.wait()
                due, key = self.heap[0]
                now = time.monotonic()
                if due > now:
                    self.lock.wait(due - now)
                    continue
                heapq.heappop(self.heap)
                if self.due.get(key) != due:
                    continue  # superseded by an event or an earlier due time
                del self.due[key]
            self.timer_pool.submit(self.submit, key, None)


GATE = Gate(RunLog(os.environ.get("BENCH_KOPF_LOG")))
_primary: dict[str, dict[str, Any]] = {}  # key -> last seen Memcached (for the event filters)
_uid_to_key: dict[str, str] = {}
_children: dict[tuple[str, str], dict[str, Any]] = {}  # (kind, uid) -> last seen child
_cache_lock = threading.Lock()


def _event_type(event: dict[str, Any]) -> str:
    return event.get("type") or ADDED  # kopf reports the initial listing with type None


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """kopf's defaults, except that its log → Kubernetes Event posting is off (Events are posted per phase
    change by the reconcile step, as opsconsole's runner does)."""
    settings.posting.enabled = False
    api()


@kopf.on.login()
def login(**kwargs: Any) -> Any:
    """Credentials from KUBECONFIG through the kubernetes client."""
    return kopf.login_via_client(**kwargs)


@kopf.on.event(MEMCACHED.group, MEMCACHED.version, MEMCACHED.plural)
def memcached_event(event: dict[str, Any], **_: Any) -> None:
    """A Memcached changed: reconcile it when the change is one opsconsole's controller would enqueue."""
    obj = event["object"]
    ev_type = _event_type(event)
    meta = obj.get("metadata") or {}
    key = MEMCACHED.request(meta.get("namespace") or "", meta["name"]).key()
    with _cache_lock:
        old = _primary.get(key)
        if ev_type == DELETED:
            _primary.pop(key, None)
            _uid_to_key.pop(str(meta.get("uid")), None)
        else:
            _primary[key] = obj
            _uid_to_key[str(meta.get("uid"))] = key
    if ev_type == DELETED:
        GATE.forget(key)
        return
    if primary_wants_reconcile(InformerEvent(ev_type, MEMCACHED, obj, old)):
        GATE.submit(key, obj)


def _child_event(kind: Any, event: dict[str, Any]) -> None:
    obj = event["object"]
    ev_type = _event_type(event)
    cache_key = (kind.kind, str((obj.get("metadata") or {}).get("uid")))
    with _cache_lock:
        old = _children.get(cache_key)
        if ev_type == DELETED:
            _children.pop(cache_key, None)
        else:
            _children[cache_key] = obj
    ev = InformerEvent(ev_type, kind, obj, old)
    if not child_changed(ev):
        return
    with _cache_lock:
        keys = owner_keys(ev, [MEMCACHED], lambda _owner, uid: _uid_to_key.get(uid))
    for key in sorted(keys):
        GATE.submit(key, None)


@kopf.on.event(DEPLOYMENT.group, DEPLOYMENT.version, DEPLOYMENT.plural)
def deployment_event(event: dict[str, Any], **_: Any) -> None:
    """A Deployment changed: reconcile its Memcached (Owns())."""
    _child_event(DEPLOYMENT, event)


@kopf.on.event(SERVICE.version, SERVICE.plural)
def service_event(event: dict[str, Any], **_: Any) -> None:
    """A Service changed: reconcile its Memcached (Owns())."""
    _child_event(SERVICE, event)
