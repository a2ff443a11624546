"""A private Redis for tests that break Redis: a `redis-server` subprocess on a free 127.0.0.1 port, without
persistence (so a restart loses every key, as a Redis without AOF or RDB does), and `celery_broker()`, which
points this test process's Celery app at it for a while (the shared Redis of the suite is never touched).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scripts.redis_local import redis_answers, redis_command
from tests.support.metrics_read import free_port


class RedisServer:
    """`redis-server --save '' --appendonly no` on its own port; `restart()` keeps the port, loses the data."""

    def __init__(self, data_dir: Path) -> None:
        self.port = free_port()
        self.data_dir = data_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> RedisServer:
        """Start it and wait until it answers PING."""
        self.proc = subprocess.Popen(redis_command(self.port, self.data_dir), stdout=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + 10
        while not redis_answers("127.0.0.1", self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("redis-server did not answer within 10 s")
            time.sleep(0.02)
        return self

    def kill(self) -> None:
        """SIGKILL: every connection drops, every key is gone."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def restart(self, down_seconds: float = 0.0) -> None:
        """Kill it, stay down for `down_seconds`, start an empty one on the same port."""
        self.kill()
        time.sleep(down_seconds)
        self.start()
        self.restarts += 1

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def _celery_caches_drop(app: object) -> None:
    """Forget the app's broker connection pools and result backend, so the next use reads the conf again."""
    app._pool = None  # type: ignore[attr-defined]
    amqp = app.__dict__.get("amqp")  # type: ignore[attr-defined]
    if amqp is not None:
        amqp._producer_pool = None
    app._backend_cache = None  # type: ignore[attr-defined]
    app._local.__dict__.pop("backend", None)  # type: ignore[attr-defined]


@contextmanager
def celery_broker(url: str) -> Iterator[None]:
    """This process's Celery app sends tasks to (and reads results from) the Redis at `url` meanwhile."""
    from opsconsole.celery import app

    before = (app.conf.broker_url, app.conf.result_backend)
    # the app's pools stay in kombu's registry (keyed by broker): left open, they serve again afterwards
    app.conf.broker_url, app.conf.result_backend = url, url
    _celery_caches_drop(app)
    try:
        yield
    finally:
        if app._pool is not None:  # the private broker's pool: nobody else uses it
            app._pool.force_close_all()
        app.conf.broker_url, app.conf.result_backend = before
        _celery_caches_drop(app)
