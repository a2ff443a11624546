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

import redis
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connections

from opsconsole.accounts.models import ActionRecord
from opsconsole.accounts.services import action_record
from reconcilers.engine.admission import Decision

log = logging.getLogger(__name__)
RETRY_SECONDS = 0.5
MAX_RETRY_SECONDS = 5.0
LEASE_SECONDS = 30
RECLAIM_SECONDS = 10.0
PUT_TIMEOUT = 0.5  # an unreachable Redis costs a request at most this: then the decision waits in memory
SEPARATOR = "\n"  # between the path and the decision's JSON in a queued item


def decision_record(decision: Decision, path: str) -> ActionRecord | None:
    """Write one decision (None when it is on record already)."""
    action = f"admission.{decision.webhook}"
    if ActionRecord.objects.filter(action=action, detail__uid=decision.uid).exists():
        return None
    return action_record(action=action, method=decision.operation[:8], path=path,
                         status_code=200 if decision.allowed else decision.code, actor=decision.user.username,
                         auth="kubernetes", target=decision.target, reason="; ".join(decision.reasons),
                         detail=decision.detail())


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
                 lease_seconds: int | None = None, reclaim_seconds: float = RECLAIM_SECONDS) -> None:
        url = redis_url or settings.REDIS_URL
        self.name = name or queue_name()
        self.instance = instance or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        prefix = f"opsconsole:admission:{{{self.name}}}:"
        self.pending_key = prefix + "pending"
        self.processing_prefix = prefix + "processing:"
        self.lease_prefix = prefix + "lease:"
        self.processing_key = self.processing_prefix + self.instance
        self.lease_key = self.lease_prefix + self.instance
        self.lease_seconds = int(lease_seconds or getattr(settings, "OPSCONSOLE_ADMISSION_LEASE_SECONDS",
                                                          LEASE_SECONDS))
        self.reclaim_seconds = min(reclaim_seconds, self.lease_seconds)
        self._renewed = float("-inf")
        self._put_redis = redis.Redis.from_url(url, socket_timeout=PUT_TIMEOUT, socket_connect_timeout=PUT_TIMEOUT)
        self._redis = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=2.0)
        self._memory: queue.Queue[tuple[Decision, str]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="admission-recorder", daemon=True)
        self._stopping = threading.Event()
        self._abandon = threading.Event()
        self.written = 0

    def start(self) -> DecisionRecorder:
        self._thread.start()
        return self

    def put(self, decision: Decision, path: str) -> None:
        """Hand over a decision: durable (in Redis) when this returns, unless Redis is unreachable, when it waits
        in this process's memory."""
        try:
            self._put_redis.lpush(self.pending_key, path + SEPARATOR + decision.to_json())
        except redis.RedisError as exc:
            log.warning("admission decision %s kept in memory: Redis refused it (%s)", decision.uid, exc)
            self._memory.put((decision, path))

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
        try:
            self._loop()
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
                if self._stopping.is_set() and self._memory.empty():
                    return
                self._abandon.wait(0.5)
                continue
            if item is None:
                if self._stopping.is_set() and self._memory.empty():
                    return
                continue
            path, _, payload = item.decode().partition(SEPARATOR)
            if not self._write(Decision.from_json(payload), path):
                return  # abandoned: the decision stays in the processing list for whoever reclaims it
            self._redis.lrem(self.processing_key, 1, item)

    def _write_from_memory(self) -> bool:
        try:
            decision, path = self._memory.get_nowait()
        except queue.Empty:
            return False
        if not self._write(decision, path):
            self._memory.put((decision, path))
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
