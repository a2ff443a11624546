"""The healing benchmarks' stack: a fresh kubesim, the opsconsole controller and a Celery worker (started and
stopped with bench/converge's process harness), a freshly migrated PostgreSQL database, and what both benchmarks
ask of them (create and patch a Memcached, read its healing records, post Events as a kubelet would).

`Stack` is a context manager: leaving it stops every process it started (the controller and the worker first,
then kubesim), whatever happened. The database is dropped and created again on entry and kept afterwards for a
look (`--database-url`, only a database of your own: its content is replaced).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bench.converge import load
from bench.converge.procs import ROOT, Proc, opsconsole_procs, start_kubesim
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube
from reconcilers.kinds.memcached import MEMCACHED

AUTO_ROLLBACK = "opsconsole.io/auto-rollback"
GOOD_IMAGE = "memcached:1.6.26-alpine"
OTHER_GOOD_IMAGE = "memcached:1.6.27-alpine"
BROKEN_IMAGE = "memcached:1.6-broken"  # kubesim never pulls a tag containing "broken"
EVENT = ResourceKind("", "v1", "events", "Event")
POD = ResourceKind("", "v1", "pods", "Pod")


@dataclass
class StackConfig:
    """What the stack runs with (the benchmarks' common options)."""

    database_url: str = "postgres://postgres@127.0.0.1:5432/h7bench"
    redis_url: str = "redis://127.0.0.1:6379/7"
    workers: int = 2
    healing_interval: float | None = None  # None: the product's default (OPSCONSOLE_HEALING_INTERVAL unset)
    data_dir: Path = Path(os.environ.get("OPSCONSOLE_DATA_DIR", "/tmp/h7-data")) / "bench-healing"
    startup_timeout: float = 90.0
    extra_env: dict[str, str] = field(default_factory=dict)

    def interval_shown(self) -> str:
        """The healing interval the controller runs with, and where it comes from."""
        if self.healing_interval is not None:
            return f"{self.healing_interval:g} s (--healing-interval)"
        if os.environ.get("OPSCONSOLE_HEALING_INTERVAL"):
            return f"{os.environ['OPSCONSOLE_HEALING_INTERVAL']} s (OPSCONSOLE_HEALING_INTERVAL from the environment)"
        return f"{product_default_interval()} s (the product's default)"


def add_stack_arguments(p: argparse.ArgumentParser) -> None:
    """The options every healing bench takes for its stack."""
    d = StackConfig()
    p.add_argument("--healing-interval", type=float, default=None,
                   help="OPSCONSOLE_HEALING_INTERVAL for the controller (default: the product's)")
    p.add_argument("--workers", type=int, default=d.workers)
    p.add_argument("--database-url", default=d.database_url,
                   help="a PostgreSQL database of your own: dropped, created and migrated")
    p.add_argument("--redis-url", default=d.redis_url)


def stack_config(a: argparse.Namespace) -> StackConfig:
    """The stack the options of `add_stack_arguments` describe."""
    return StackConfig(database_url=a.database_url, redis_url=a.redis_url, workers=a.workers,
                       healing_interval=a.healing_interval)


def product_default_interval() -> str:
    """The default of OPSCONSOLE_HEALING_INTERVAL as opsconsole/settings.py declares it."""
    text = (ROOT / "opsconsole" / "settings.py").read_text()
    found = re.search(r'env_number\("OPSCONSOLE_HEALING_INTERVAL",\s*([0-9.]+)\)', text)
    return found.group(1) if found else "?"


def _admin_url(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, parts.fragment)), parts.path.lstrip("/")


def fresh_database(url: str, data_dir: Path) -> None:
    """Drop and create the database of `url`, then migrate it."""
    import psycopg

    admin, name = _admin_url(url)
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise ValueError(f"database name {name!r}: letters, digits and _ only")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "opsconsole.settings",
           "OPSCONSOLE_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)


def log(msg: str) -> None:
    """Progress, on stderr (the figures go to stdout)."""
    print(msg, file=sys.stderr, flush=True)


class Stack:
    """kubesim + controller + worker + database; see the module docstring."""

    def __init__(self, cfg: StackConfig) -> None:
        self.cfg = cfg
        self.run_dir = cfg.data_dir / time.strftime("%Y%m%d-%H%M%S")
        self.procs: list[Proc] = []
        self.kubesim: Proc | None = None
        self.api: Any = None

    def __enter__(self) -> Stack:
        # a SIGTERM (a timeout, a `kill`) unwinds through __exit__ like Ctrl-C, so no process is left behind
        signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(128 + signal.SIGTERM))
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _start(self) -> None:
        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log(f"database {cfg.database_url}: created afresh and migrated")
        fresh_database(cfg.database_url, cfg.data_dir)
        token = secrets.token_urlsafe(16)
        base_env = {**os.environ, "PYTHONPATH": str(ROOT), "OPSCONSOLE_DATA_DIR": str(cfg.data_dir)}
        defaults = _kubelet_defaults()
        self.kubesim, _url, kubeconfig = start_kubesim(self.run_dir, base_env, token=token, **defaults)
        self.api = kube.build_api_client(kubeconfig)
        load.install(self.api, [])
        queue = f"bench-healing-{uuid.uuid4().hex[:8]}"
        env = {**base_env, "DJANGO_SETTINGS_MODULE": "opsconsole.settings", "DATABASE_URL": cfg.database_url,
               "REDIS_URL": cfg.redis_url, "OPSCONSOLE_CELERY_QUEUE": queue, "KUBECONFIG": str(kubeconfig),
               "OPSCONSOLE_RECONCILERS": "reconcilers.kinds.memcached.MemcachedReconciler",
               "OPSCONSOLE_BUILTIN_KINDS": "0", "LOG_LEVEL": "WARNING", **cfg.extra_env}
        if cfg.healing_interval is not None:
            env["OPSCONSOLE_HEALING_INTERVAL"] = f"{cfg.healing_interval:g}"
        self.procs = opsconsole_procs(self.run_dir, env, cfg.workers, queue)
        for proc in self.procs:
            proc.start()
        log(f"kubesim, controller and {cfg.workers} workers started; logs in {self.run_dir}")

    def stop(self) -> None:
        """Stop the controller and the worker, then kubesim (each by its own pid and process group)."""
        for proc in reversed(self.procs):
            proc.stop()
        if self.kubesim is not None:
            self.kubesim.stop()

    def alive_or_raise(self) -> None:
        """Raise with the log's tail when an operator process exited."""
        for proc in self.procs:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited\n--- {proc.name} log ---\n{proc.log()}")

    # -- the cluster ---------------------------------------------------------------------------------------

    def namespace(self, name: str) -> str:
        kube.ensure_object(self.api, load.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": name}})
        return name

    def create_memcached(self, namespace: str, name: str, image: str = GOOD_IMAGE, size: int = 1) -> dict[str, Any]:
        """A Memcached with automatic rollback on (its annotation)."""
        body = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                "metadata": {"name": name, "namespace": namespace, "annotations": {AUTO_ROLLBACK: "true"}},
                "spec": {"size": size, "image": image}}
        created: dict[str, Any] = kube.create_object(self.api, MEMCACHED, body)
        return created

    def patch_spec(self, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """A merge patch of the spec, as `kubectl edit` would write it; returns the object."""
        out: dict[str, Any] = kube.request_json(self.api, "PATCH", kube.object_path(MEMCACHED, namespace, name),
                                                body={"spec": spec}, query={"fieldManager": "kubectl-edit"},
                                                content_type=kube.MERGE_PATCH)
        return out

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = kube.get_object(self.api, MEMCACHED, namespace, name)
        return obj

    def delete(self, namespace: str, name: str) -> None:
        try:
            kube.delete_object(self.api, MEMCACHED, namespace, name)
        except kube.ApiException:
            pass

    def running_at(self, namespace: str, name: str, min_generation: int = 1) -> bool:
        """Whether the object reports Running for a generation of at least `min_generation`."""
        obj = self.get(namespace, name)
        status = obj.get("status") or {}
        generation = int(obj["metadata"].get("generation") or 0)
        observed = int(status.get("observedGeneration") or generation)
        return (status.get("phase") == "Running" and generation >= min_generation
                and observed >= generation)

    def wait_running(self, namespace: str, name: str, timeout: float, min_generation: int = 1) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.running_at(namespace, name, min_generation):
                return True
            self.alive_or_raise()
            time.sleep(0.1)
        return False

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = kube.list_objects(self.api, POD, namespace).items
        return items

    def post_event(self, pod: dict[str, Any], reason: str, message: str, previous: dict[str, Any] | None
                   ) -> dict[str, Any]:
        """A Warning Event about `pod` from the kubelet: created once, then its count raised (as client-go's
        EventCorrelator aggregates a repeating Event)."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        meta = pod["metadata"]
        if previous is None:
            body = {"apiVersion": "v1", "kind": "Event",
                    "metadata": {"namespace": meta["namespace"], "name": f"{meta['name']}.{time.time_ns():x}"},
                    "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": meta["namespace"],
                                       "name": meta["name"], "uid": meta["uid"],
                                       "fieldPath": "spec.containers{memcached}"},
                    "reason": reason, "message": message, "type": "Warning", "count": 1,
                    "firstTimestamp": now, "lastTimestamp": now,
                    "source": {"component": "kubelet", "host": "kubesim-node"}}
            created: dict[str, Any] = kube.create_object(self.api, EVENT, body)
            return created
        path = kube.object_path(EVENT, meta["namespace"], previous["metadata"]["name"])
        patched: dict[str, Any] = kube.request_json(
            self.api, "PATCH", path, body={"count": int(previous.get("count") or 1) + 1, "lastTimestamp": now},
            content_type=kube.MERGE_PATCH)
        return patched

    # -- the record ----------------------------------------------------------------------------------------

    def healing_records(self, uid: str, since_seq: int = 0) -> list[HealingRow]:
        """The object's healing records after `since_seq`, in chain order."""
        import psycopg

        with psycopg.connect(self.cfg.database_url) as conn:
            rows = conn.execute(
                "SELECT seq, action, rule, actor, generation, target_generation, detail, created_at, reason "
                "FROM reconcilers_healingrecord WHERE resource_uid = %s AND seq > %s ORDER BY seq",
                (uid, since_seq)).fetchall()
        return [HealingRow(int(r[0]), r[1], r[2], r[3], int(r[4]), r[5], r[6] or {}, r[7].timestamp(), r[8] or "")
                for r in rows]

    def active_anomalies(self, uid: str) -> dict[str, Any]:
        """The object's anomalies matching now (its mirror row's `active_anomalies`)."""
        import psycopg

        with psycopg.connect(self.cfg.database_url) as conn:
            row = conn.execute("SELECT active_anomalies FROM reconcilers_resource WHERE uid = %s", (uid,)).fetchone()
        return dict(row[0] or {}) if row else {}

    def archived_events_about(self, involved_uid: str, since: float) -> int:
        """Occurrences the archive counted, observed after `since` (Unix time), of Events about `involved_uid`."""
        import psycopg

        with psycopg.connect(self.cfg.database_url) as conn:
            row = conn.execute("SELECT coalesce(sum(occurrences), 0) FROM reconcilers_kubeevent "
                               "WHERE involved_uid = %s AND observed_at >= to_timestamp(%s)",
                               (involved_uid, since)).fetchone()
        return int(row[0]) if row else 0


@dataclass
class HealingRow:
    """One healing record, as the benchmarks read it."""

    seq: int
    action: str
    rule: str
    actor: str
    generation: int
    target_generation: int | None
    detail: dict[str, Any]
    at: float  # Unix time
    reason: str = ""

    @property
    def from_generation(self) -> int:
        """The generation a rollback record is about (its detail's `from_generation`, else its generation)."""
        value = self.detail.get("from_generation") if isinstance(self.detail, dict) else None
        return int(value) if isinstance(value, int) else self.generation


def _kubelet_defaults() -> dict[str, float]:
    """kubesim's own default pod delays (scheduling, start, readiness), as `kubesim` runs without flags."""
    from kubesim.options import KubeletOptions

    k = KubeletOptions()
    return {"schedule_delay": k.schedule_delay, "start_delay": k.start_delay, "ready_delay": k.ready_delay}


def median(values: list[float]) -> float:
    """The median (NaN for none)."""
    if not values:
        return float("nan")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
