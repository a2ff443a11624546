"""The Celery application shared by every worker process, and its per-process telemetry hooks.

Reliability settings follow docs/architecture.md's Semantics (at-least-once): late acks, reject on worker lost,
prefetch 1, JSON only, and a broker visibility timeout far longer than the longest task so that Redis never
redelivers a task that is still running (see `opsconsole.settings`).

Telemetry (docs/architecture.md, Observability): a worker's main process serves /metrics as the aggregate of its
prefork children (prometheus-client multiprocess mode; the directory is wiped at start), and each child sets up
tracing in `worker_process_init`, with the trace context carried in the task headers.

Both the main process (before it forks) and each child (after its initialisation) freeze their start-up objects out
of the garbage collector's reach (`opsconsole.gcsettle`).

The app is created as Django starts (`opsconsole.apps`) and is then Celery's current and default app: the engine
(`reconcilers.engine.dispatch`) and the services reach it as `celery.current_app`, so nothing in `reconcilers`
imports this module.
"""

import logging
import os
import shutil
import sys
from pathlib import Path

from celery import Celery, signals

from opsconsole.gcsettle import settle

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")

log = logging.getLogger(__name__)


def _running_as_worker() -> bool:
    """True in the main process of `celery ... worker` (before any metric is defined)."""
    return "worker" in sys.argv[1:] and Path(sys.argv[0]).name in {"celery", "__main__.py"}


if _running_as_worker():
    # Multiprocess mode must be chosen before prometheus_client is first imported; one directory per worker
    # main process, emptied now so samples of an earlier run are never summed in.
    _data = Path(os.environ.get("OPSCONSOLE_DATA_DIR") or Path(__file__).resolve().parent.parent / "data")
    _dir = Path(os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(_data / "prometheus" / f"worker-{os.getpid()}")))
    shutil.rmtree(_dir, ignore_errors=True)
    _dir.mkdir(parents=True, exist_ok=True)

app = Celery("opsconsole", include=["opsconsole.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The app of every thread: the engine and services send and inspect through `celery.current_app` (they never
# import this module), and a thread of their own (a drain thread, a background read) must not get Celery's
# fallback app, which is current only where no app was created.
app.set_default()


@signals.worker_init.connect
def _settle_before_fork(**_: object) -> None:
    """Main process, before the pool forks: its start-up objects frozen out of the collector's reach
    (`opsconsole.gcsettle`), and so in every child."""
    settle()


@signals.worker_init.connect
def _serve_worker_metrics(**_: object) -> None:
    """Main process: serve the children's aggregate on OPSCONSOLE_WORKER_METRICS_PORT (0 turns it off)."""
    from django.conf import settings

    from opsconsole.telemetry.metrics import metrics_server_start

    port = int(getattr(settings, "OPSCONSOLE_WORKER_METRICS_PORT", 0) or 0)
    if port:
        try:
            metrics_server_start(port, getattr(settings, "OPSCONSOLE_METRICS_ADDR", "127.0.0.1"))
        except OSError as exc:  # a busy port must not stop the worker from working
            log.warning("worker /metrics not served on port %s: %s", port, exc)


@signals.celeryd_after_setup.connect
def _linger_slots(sender: str = "", instance: object = None, **_: object) -> None:
    """Main process, before the pool starts: how many of this node's processes may linger for the next key at once
    (`reconcilers.engine.drain.linger_slots`: all but one; a solo pool runs one task at a time)."""
    from reconcilers.engine.drain import linger_slots

    linger_slots(f"{sender}/{os.getpid()}", worker_processes(instance))  # the pid: two nodes never share a name


def worker_processes(worker: object) -> int:
    """The tasks a Celery worker (`WorkController`) runs at once for sure: its concurrency (with `--autoscale`, the
    minimum it keeps), one for the solo pool."""
    pool = getattr(worker, "pool_cls", None)
    if pool is not None and getattr(pool, "__module__", "").endswith(".solo"):
        return 1
    count = getattr(worker, "min_concurrency" if getattr(worker, "autoscale", None) else "concurrency", None)
    try:
        return max(1, int(count or 1))
    except (TypeError, ValueError):
        return 1


@signals.worker_process_init.connect
def _init_child_telemetry(**_: object) -> None:
    """Each prefork child: its own TracerProvider, and the Celery instrumentation reading task headers."""
    from opsconsole.telemetry.metrics import reconciler_metrics_init
    from opsconsole.telemetry.tracing import celery_instrument, tracing_setup
    from reconcilers.engine.drain import drain_threads

    reconciler_metrics_init(concurrency=drain_threads())  # a child runs a reconcile per drain thread at once
    if tracing_setup("opsconsole-worker") is not None:
        celery_instrument()
    settle()  # what the child's own initialisation allocated, too


@signals.task_prerun.connect
def _database_connections_usable(**_: object) -> None:
    """Before each task: drop a connection that is broken or older than CONN_MAX_AGE (as Django does around
    each web request), so reusing connections across tasks never hands a task a dead one."""
    from django.db import close_old_connections

    close_old_connections()


@signals.worker_process_shutdown.connect
def _child_gone(pid: int | None = None, **_: object) -> None:
    """A child exits: flush its spans, and stop counting its live gauges."""
    from opsconsole.telemetry.metrics import child_exited
    from opsconsole.telemetry.tracing import span_store

    store = span_store()
    if store is not None:
        store.force_flush(2000)
    child_exited(pid or os.getpid())
