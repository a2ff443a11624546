"""Making the test database unavailable to the engine for a while, without touching the shared server.

- PostgreSQL: `TcpProxy`, a small TCP forwarder on a free 127.0.0.1 port that the engine's processes connect
  through (`DatabaseOutage.engine_url`). `cut()` resets every connection through it and refuses new ones
  (connection refused, as from a database that is down); `restore()` listens again on the same port.
- SQLite: the database file (and its journal) moved aside and a directory put in its place, so every new
  connection fails with "unable to open database file"; `restore()` puts the file back. Connections opened
  before the cut keep the file's inode (as a query in flight on a server would finish); the engine opens a
  connection per task on SQLite (CONN_MAX_AGE 0), so its next task meets the outage.

While the database is cut off, this test process must not use it either (on SQLite it shares the file).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path

from django.db import connection

from tests.support.metrics_read import free_port
from tests.support.workers import test_database_url


class TcpProxy:
    """Forward 127.0.0.1:<port> to target_host:target_port, one pair of threads per connection."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.connections = 0  # accepted so far
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> TcpProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, args=(listener,), name="tcp-proxy", daemon=True)
        self._thread.start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # the listener was closed: cut() or stop()
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self.connections += 1
                self._open.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()

    def cut(self) -> None:
        """Stop listening (new connections are refused) and reset every open connection."""
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            open_now = list(self._open)
        for sock in open_now:
            self._close(sock)

    def restore(self) -> None:
        """Listen again on the same port."""
        self.start()

    def stop(self) -> None:
        self.cut()


class DatabaseOutage:
    """The test database as the engine sees it (`engine_url`), and a switch to take it away and bring it back."""

    def __init__(self) -> None:
        s = connection.settings_dict
        self.vendor = connection.vendor
        self.proxy: TcpProxy | None = None
        self.path: Path | None = None
        self.down = False
        if self.vendor == "postgresql":
            self.proxy = TcpProxy(s.get("HOST") or "127.0.0.1", int(s.get("PORT") or 5432)).start()
        elif self.vendor == "sqlite":
            self.path = Path(s["NAME"])
        else:
            raise RuntimeError(f"no way to cut off a {self.vendor} database")

    @property
    def engine_url(self) -> str:
        """The DATABASE_URL the engine's processes use: through the proxy on PostgreSQL, the file on SQLite."""
        if self.proxy is None:
            return test_database_url()
        s = connection.settings_dict
        password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
        auth = f"{s['USER']}{password}@" if s.get("USER") else ""
        return f"postgres://{auth}127.0.0.1:{self.proxy.port}/{s['NAME']}"

    def _aside(self) -> list[tuple[Path, Path]]:
        assert self.path is not None
        names = [self.path, *(self.path.with_name(self.path.name + suffix) for suffix in ("-journal", "-wal", "-shm"))]
        return [(p, p.with_name(p.name + ".cut")) for p in names]

    def cut(self) -> None:
        """The database goes away for the engine (and for this process: do not query it meanwhile)."""
        connection.close()
        if self.proxy is not None:
            self.proxy.cut()
        else:
            for live, aside in self._aside():
                if live.exists():
                    os.replace(live, aside)
            assert self.path is not None
            self.path.mkdir()
        self.down = True

    def restore(self) -> None:
        """The database is back."""
        if self.proxy is not None:
            self.proxy.restore()
        else:
            assert self.path is not None
            self.path.rmdir()
            for live, aside in self._aside():
                if aside.exists():
                    os.replace(aside, live)
        self.down = False

    def close(self) -> None:
        if self.down:
            self.restore()
        if self.proxy is not None:
            self.proxy.stop()
