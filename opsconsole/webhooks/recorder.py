"""Every admission decision on the action record (the chained, append-only `ActionRecord`), written off the
request path and never lost: the webhook answers within its timeout even when the database is slow, and a
decision it answered is written at least once even when the server is killed before the database took it.

How: `put()` pushes the decision (JSON) onto a Redis list before the answer goes back (one LPUSH, bounded by a
short socket timeout). The recorder's thread moves one decision at a time from that list onto a processing list
of its own (LMOVE: atomic), writes it, then removes it. A recorder holds a lease key (renewed while it lives);
every recorder, at start and then every `RECLAIM_SECONDS`, puts back on the list what a recorder whose lease
expired left in its processing list (a SIGKILLed server's decision in flight). A decision handed over twice is
written once: the write skips a uid already on record for that webhook. While the database refuses, the write is
retried with backoff; while Redis is unreachable, decisions wait in memory instead (and are written from there).
On a clean stop the recorder writes what it can within its timeout; what is left stays in Redis for the next one.

Supervised: a failure of the loop (Redis gone between two commands, a bug) restarts the loop, and a thread that
died anyway is started again by `supervise()` (the server calls it every few seconds); both count in
`on_restart` (the server's `opsconsole_thread_restarts_total{thread="admission-recorder"}`). After a restart, or
after Redis failed under it, the recorder first puts back what its own processing list holds (written once: by
uid). An item that cannot be read as a decision is set aside on a `poison` list, with an action record
`admission.unreadable` saying so, instead of stopping the loop. `problem()` names what is wrong while the thread is
down or has made no progress for `STUCK_SECONDS` (`/healthz` answers 503 with it).

The queue is per database (`OPSCONSOLE_ADMISSION_QUEUE`, default derived from the database's name), so two
installations sharing a Redis never write each other's decisions. `OPSCONSOLE_ADMISSION_LEASE_SECONDS` (30): how
long a killed recorder's decision in flight waits before another recorder takes it over.

A record: action `admission.validate` / `admission.mutate`, actor the Kubernetes user, auth `kubernetes`, method
the operation (CREATE, UPDATE), target `Kind namespace/name`, reason the refusal's messages, status 200 when
admitted (else 422, or 500 for a kind's failing hook), detail: uid, groups, the patch, dryRun, the hook's error.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connections

from opsconsole.accounts.action_records import action_record
from reconcilers.engine.admission import Decision
from reconcilers.models import ActionRecord

log = logging.getLogger(__name__)
RETRY_SECONDS = 0.5
MAX_RETRY_SECONDS = 5.0
LEASE_SECONDS = 30
RECLAIM_SECONDS = 10.0
PUT_TIMEOUT = 0.5  # an unreachable Redis costs a request at most this: then the decision waits in memory
SEPARATOR = "\n"  # between the path and the decision's JSON in a queued item
STUCK_SECONDS = 60.0  # no decision written and no empty queue seen for this long: the recorder is stuck
UNREADABLE = "admission.unreadable"


def decision_record(decision: Decision, path: str) -> ActionRecord | None:
    """Write one decision (None when it is on record already)."""
    action = f"admission.{decision.webhook}"
    if ActionRecord.objects.filter(action=action, detail__uid=decision.uid).exists():  # indexed (0006)
        return None
    return action_record(action=action, method=decision.operation[:8], path=path,
                         status_code=200 if decision.allowed else decision.code, actor=decision.user.username,
                         auth="kubernetes", target=decision.target, reason="; ".join(decision.reasons),
                         detail=decision.detail(), remote_addr=decision.peer_address)


def queue_name() -> str:
    """`OPSCONSOLE_ADMISSION_QUEUE`, else one derived from the default database's name (and host)."""
    configured = getattr(settings, "OPSCONSOLE_ADMISSION_QUEUE", "")
    if configured:
        return configured
    db = connections["default"].settings_dict
    return hashlib.sha256(f"{db.get('HOST') or ''}:{db.get('PORT') or ''}/{db['NAME']}".encode()).hexdigest()[:16]


class DecisionRecorder:
    """A thread that writes the decisions handed to it, through a durable queue in Redis (see the module)."""

    def __init__(self, name: str | None = None, redis_url: str | None = None, *, instance: str | None = None,
                 lease_seconds: int | None = None, reclaim_seconds: float = RECLAIM_SECONDS,
                 on_restart: Callable[[], None] | None = None, stuck_seconds: float = STUCK_SECONDS) -> None:
        url = redis_url or settings.REDIS_URL
        self.name = name or queue_name()
        self.instance = instance or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        prefix = f"opsconsole:admission:{{{self.name}}}:"
        self.pending_key = prefix + "pending"
        self.processing_prefix = prefix + "processing:"
        self.lease_prefix = prefix + "lease:"
        self.processing_key = self.processing_prefix + self.instance
        self.poison_key = prefix + "poison"
        self.lease_key = self.lease_prefix + self.instance
        self.lease_seconds = int(lease_seconds or getattr(settings, "OPSCONSOLE_ADMISSION_LEASE_SECONDS",
                                                          LEASE_SECONDS))
        self.reclaim_seconds = min(reclaim_seconds, self.lease_seconds)
        self._renewed = float("-inf")
        self._put_redis = redis.Redis.from_url(url, socket_timeout=PUT_TIMEOUT, socket_connect_timeout=PUT_TIMEOUT)
        self._redis = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=2.0)
        self._memory: queue.Queue[tuple[Decision, str]] = queue.Queue()
        self._thread = self._new_thread()
        self._started = False
        self._stopping = threading.Event()
        self._abandon = threading.Event()
        self._requeue_own = True
        self._progress = time.monotonic()
        self._supervise_lock = threading.Lock()
        self.on_restart = on_restart or (lambda: None)
        self.stuck_seconds = stuck_seconds
        self.written = 0
        self.restarts = 0
        self.set_aside = 0

    def _new_thread(self) -> threading.Thread:
        return threading.Thread(target=self._run, name="admission-recorder", daemon=True)

    def start(self) -> DecisionRecorder:
        self._started = True
        self._progress = time.monotonic()
        self._thread.start()
        return self

    def put(self, decision: Decision, path: str, note: Callable[[Any], None] | None = None) -> None:
        """Hand over a decision: durable (in Redis) when this returns, unless Redis is unreachable, when it waits
        in this process's memory. `note(pipeline)` adds commands of its own to the same round trip (the admitted
        write's entry); a failure there never fails the hand-over."""
        try:
            pipe = self._put_redis.pipeline(transaction=False)
            pipe.lpush(self.pending_key, path + SEPARATOR + decision.to_json())
            if note is not None:
                try:
                    note(pipe)
                except Exception:  # noqa: BLE001 - the note is the engine's help, never the admission's condition
                    log.warning("admission decision %s: its admitted write not noted", decision.uid, exc_info=True)
            pipe.execute()
        except redis.RedisError as exc:
            log.warning("admission decision %s kept in memory: Redis refused it (%s)", decision.uid, exc)
            self._memory.put((decision, path))

    # supervision

    def alive(self) -> bool:
        """Whether the recorder's thread runs."""
        return self._thread.is_alive()

    def supervise(self) -> bool:
        """Start the thread again when it died (not when it was stopped); True when it did."""
        with self._supervise_lock:
            if not self._started or self._stopping.is_set() or self._abandon.is_set() or self._thread.is_alive():
                return False
            log.error("admission recorder: its thread died; starting it again")
            self._restarted()
            self._thread = self._new_thread()
            self._thread.start()
            return True

    def _restarted(self) -> None:
        self.restarts += 1
        self._requeue_own = True
        try:
            self.on_restart()
        except Exception:  # noqa: BLE001 - a metric never stops the recorder
            log.warning("admission recorder: restart not counted", exc_info=True)

    def problem(self) -> str:
        """What is wrong with the recorder ('' when nothing): not running, or no progress for too long."""
        if not self._started or self._stopping.is_set():
            return ""
        if not self._thread.is_alive():
            return "the admission recorder is not running"
        idle = time.monotonic() - self._progress
        if idle > self.stuck_seconds:
            return (f"the admission recorder has made no progress for {idle:.0f} s (Redis or the database "
                    "refusing)")
        return ""

    def pending(self) -> int:
        """Decisions handed over and not written yet (this queue's, any recorder's)."""
        try:
            waiting = int(self._redis.llen(self.pending_key))
            waiting += sum(int(self._redis.llen(key)) for key in self._redis.scan_iter(self.processing_prefix + "*"))
        except redis.RedisError:
            waiting = 0
        return waiting + self._memory.qsize()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is waiting (up to `timeout`), then end the thread; what is left stays in Redis."""
        self._stopping.set()
        self._thread.join(timeout)
        self._abandon.set()
        self._thread.join(5)
        if self._memory.qsize():
            log.error("admission decisions not recorded at shutdown (Redis and the database both refused them): "
                      "%d", self._memory.qsize())

    def crash(self) -> None:
        """Stop as a killed process would (tests): at once, the decision in hand left where it is, lease kept
        until it expires."""
        self._abandon.set()
        self._thread.join(10)

    # the thread

    def _run(self) -> None:
        delay = RETRY_SECONDS
        try:
            while not self._abandon.is_set():
                try:
                    self._loop()
                    return
                except Exception:  # noqa: BLE001 - supervised: the loop starts again, counted
                    log.exception("admission recorder: the loop failed; starting it again")
                    self._restarted()
                    self._abandon.wait(delay)
                    delay = min(delay * 2, MAX_RETRY_SECONDS)
        finally:
            if not self._abandon.is_set():
                try:
                    self._redis.delete(self.lease_key)
                except redis.RedisError:
                    pass
            connections.close_all()  # this thread's connection: a test database can then be dropped

    def _renew(self) -> None:
        self._redis.set(self.lease_key, "1", ex=self.lease_seconds)
        self._renewed = time.monotonic()

    def reclaim(self) -> int:
        """Put back on the list what recorders whose lease expired left in their processing lists; how many."""
        moved = 0
        for key in self._redis.scan_iter(self.processing_prefix + "*"):
            key = key.decode()
            owner = key[len(self.processing_prefix):]
            if owner == self.instance or self._redis.exists(self.lease_prefix + owner):
                continue
            put_back = 0
            while self._redis.lmove(key, self.pending_key, "RIGHT", "LEFT") is not None:
                put_back += 1
            log.warning("admission decisions left by the stopped recorder %s: %d put back", owner, put_back)
            moved += put_back
        return moved

    def _loop(self) -> None:
        self._renewed = reclaimed = float("-inf")
        while not self._abandon.is_set():
            if self._write_from_memory():  # what Redis could not take, first
                continue
            try:
                if self._requeue_own:
                    self._put_back_own()
                if time.monotonic() - self._renewed > self.lease_seconds / 3:
                    self._renew()
                if time.monotonic() - reclaimed > self.reclaim_seconds:
                    self.reclaim()
                    reclaimed = time.monotonic()
                item = (self._redis.lmove(self.pending_key, self.processing_key, "RIGHT", "LEFT")
                        if self._stopping.is_set() else
                        self._redis.blmove(self.pending_key, self.processing_key, 0.2, "RIGHT", "LEFT"))
            except redis.RedisError as exc:
                log.warning("admission recorder: Redis unreachable (%s); trying again", exc)
                self._requeue_own = True
                if self._stopping.is_set() and self._memory.empty():
                    return
                self._abandon.wait(0.5)
                continue
            if item is None:
                self._progress = time.monotonic()
                if self._stopping.is_set() and self._memory.empty():
                    return
                continue
            try:
                text = item.decode()
                path, _, payload = text.partition(SEPARATOR)
                decision = Decision.from_json(payload)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                self._set_aside(item, exc)
                continue
            if not self._write(decision, path):
                return  # abandoned: the decision stays in the processing list for whoever reclaims it
            self._progress = time.monotonic()
            try:
                self._redis.lrem(self.processing_key, 1, item)
            except redis.RedisError as exc:  # written: put back with the rest of the processing list, skipped then
                log.warning("admission recorder: Redis failed after a write (%s); trying again", exc)
                self._requeue_own = True

    def _put_back_own(self) -> None:
        """Put what this recorder's processing list holds back on the queue (after a restart or a Redis failure:
        a decision in hand may or may not be written; written ones are skipped by uid)."""
        moved = 0
        while self._redis.lmove(self.processing_key, self.pending_key, "LEFT", "RIGHT") is not None:
            moved += 1
        if moved:
            log.warning("admission recorder: %d decisions in hand put back on the queue", moved)
        self._requeue_own = False

    def _set_aside(self, item: bytes, exc: Exception) -> None:
        """An item that is not a decision: onto the poison list, with an action record saying so."""
        digest = hashlib.sha256(item).hexdigest()
        log.error("admission recorder: an unreadable item (sha256 %s, %d bytes) set aside on %s: %s", digest,
                  len(item), self.poison_key, exc)
        try:
            pipe = self._redis.pipeline(transaction=True)
            pipe.lpush(self.poison_key, item)
            pipe.lrem(self.processing_key, 1, item)
            pipe.execute()
        except redis.RedisError:
            self._requeue_own = True
            raise
        self.set_aside += 1
        self._progress = time.monotonic()
        try:
            action_record(action=UNREADABLE, method="", path="", status_code=500, auth="kubernetes",
                          reason=f"a queued admission decision could not be read ({type(exc).__name__}: {exc}); "
                                 f"set aside on {self.poison_key}",
                          detail={"sha256": digest, "size": len(item), "queue": self.poison_key})
        except DatabaseError:
            log.error("admission recorder: the unreadable item %s is not on record", digest, exc_info=True)

    def _write_from_memory(self) -> bool:
        try:
            decision, path = self._memory.get_nowait()
        except queue.Empty:
            return False
        if not self._write(decision, path):
            self._memory.put((decision, path))
        else:
            self._progress = time.monotonic()
        return True

    def _write(self, decision: Decision, path: str) -> bool:
        """Write one decision, retrying while the database refuses; False when abandoned first."""
        delay, failures = RETRY_SECONDS, 0
        while not self._abandon.is_set():
            try:
                if decision_record(decision, path) is not None:
                    self.written += 1
                return True
            except DatabaseError as exc:
                failures += 1
                if failures == 1:
                    log.warning("admission decision %s not recorded yet (%s); retrying", decision.uid, exc,
                                exc_info=True)
                elif failures % 20 == 0:
                    log.warning("admission decision %s still not recorded after %d tries (%s)", decision.uid,
                                failures, exc)
                close_old_connections()
                if time.monotonic() - self._renewed > self.lease_seconds / 3:
                    try:
                        self._renew()
                    except redis.RedisError:
                        pass
                self._abandon.wait(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)
        return False
