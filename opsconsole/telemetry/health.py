"""The controller's plain-HTTP port: `/metrics` (this process's registry, as before) and `/healthz`.

`/healthz` answers 200 `{"status": "ok", "threads": {...}}` while every supervised background thread of the
process is up (`reconcilers.engine.supervise`: informers, leader election, the Events archive and healing steps),
and 503 `{"status": "unhealthy", "down": [...], ...}` while one is down (it died and waits to be started again,
or its OS thread is gone): the kubelet's liveness probe then restarts a controller whose threads keep dying.
Any other path serves the metrics, as prometheus-client's own server does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

from prometheus_client.exposition import MetricsHandler

from opsconsole.telemetry.metrics import registry_for_scrape


def health_report(threads: Callable[[], dict[str, bool]] | None = None) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of `/healthz` from the supervised threads' states."""
    if threads is None:
        from reconcilers.engine import supervise

        threads = supervise.threads
    states = threads()
    down = sorted(name for name, up in states.items() if not up)
    body: dict[str, Any] = {"status": "unhealthy" if down else "ok", "threads": states}
    if down:
        body["down"] = down
    return (503 if down else 200), body


def metrics_health_server_start(port: int, addr: str = "127.0.0.1",
                                threads: Callable[[], dict[str, bool]] | None = None) -> ThreadingHTTPServer:
    """Serve `/healthz` and the metrics on `addr:port` (0: a free port, see `server_address`) from a daemon
    thread; the server is returned (`shutdown()` stops it)."""

    class Handler(MetricsHandler.factory(registry_for_scrape())):  # type: ignore[misc]
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if urlparse(self.path).path != "/healthz":
                super().do_GET()
                return
            status, body = health_report(threads)
            payload = json.dumps(body, sort_keys=True).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer((addr, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics-health-server", daemon=True).start()
    return server
