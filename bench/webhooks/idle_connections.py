"""The webhook server's memory under idle and half-sent connections: `manage.py runwebhooks` of a source tree (this
one, or another checkout such as a `git worktree` of an older commit) in a process of its own, then `--connections`
TCP connections to its port that say nothing (not even a TLS ClientHello), then as many that finish the TLS
handshake (presenting the API server's client certificate where the server asks for one) and send half a request
head. Prints the server's RSS (VmRSS) at start, with the idle ones open, with the half-sent ones open, how many of
sockets the server still held (the rest it closed), and whether it still answered a review meanwhile.

Run: ``.venv/bin/python -m bench.webhooks.idle_connections [--tree /tmp/h2-before] [--connections 1000]``.
Only against 127.0.0.1.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import resource
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATH = "/validate/cache.example.com/memcacheds"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def still_open(sockets: list[socket.socket]) -> int:
    """How many of the sockets the server has not closed (peeked at the TCP level, TLS or not)."""
    count = 0
    for s in sockets:
        raw = socket.fromfd(s.fileno(), socket.AF_INET, socket.SOCK_STREAM)
        raw.setblocking(False)
        try:
            if raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b"":
                count += 1
        except (BlockingIOError, TimeoutError):
            count += 1
        except OSError as exc:
            if exc.errno not in (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN):
                raise
        finally:
            raw.close()
    return count


def server_sockets(pid: int) -> int:
    """Sockets the server process holds open (its listener included)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except OSError:
            pass
    return count


def answers(port: int, context: ssl.SSLContext) -> bool:
    body = json.dumps({"request": {"uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": "n", "name": "x",
                                   "userInfo": {"username": "bench"},
                                   "object": {"metadata": {"name": "x"}, "spec": {"size": 1}}}}).encode()
    request = urllib.request.Request(f"https://localhost:{port}{PATH}", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as resp:
            return resp.status == 200
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(ROOT), help="the source tree whose runwebhooks runs (default this one)")
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--max-connections", type=int, default=0, help="the server's limit (a bounded server only)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds to wait before reading RSS (default 3)")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tree = Path(args.tree)
    data = Path(tempfile.mkdtemp(prefix="bench-idle-"))
    env = {**os.environ, "OPSCONSOLE_DATA_DIR": str(data), "OPSCONSOLE_TRACING": "off", "PYTHONPATH": str(tree)}
    helptext = subprocess.run([sys.executable, "manage.py", "runwebhooks", "--help"], cwd=tree, env=env,
                              capture_output=True, text=True).stdout
    mutual = "--metrics-port" in helptext
    command = [sys.executable, "manage.py", "runwebhooks", "--port", "0", "--cert-dir", str(data / "certs")]
    if mutual:
        command += ["--metrics-port", "-1"]
        if args.max_connections:
            command += ["--max-connections", str(args.max_connections)]
    proc = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = 0
    for _ in range(100):
        line = proc.stdout.readline()
        if "serving admission webhooks on https://" in line:
            port = int(line.split("https://", 1)[1].split()[0].rsplit(":", 1)[1])
            break
    if not port:
        proc.kill()
        raise SystemExit("runwebhooks did not start")
    context = ssl.create_default_context(cafile=str(data / "certs" / "webhook-ca.pem"))
    if mutual:
        context.load_cert_chain(str(data / "certs" / "webhook-client.pem"),
                                str(data / "certs" / "webhook-client-key.pem"))
    try:
        assert answers(port, context)
        time.sleep(1)
        print(f"tree {tree} ({'mutual TLS, bounded' if mutual else 'before'}), {args.connections} connections")
        print(f"  at start:              RSS {rss_mib(proc.pid):7.1f} MiB")
        idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(args.connections)]
        time.sleep(args.settle)
        print(f"  {len(idle)} idle open:        RSS {rss_mib(proc.pid):7.1f} MiB, sockets in the server: "
              f"{server_sockets(proc.pid)}, a review answered meanwhile: {answers(port, context)}")
        for s in idle:
            s.close()
        time.sleep(args.settle)
        half: list[socket.socket] = []
        refused = 0
        for _ in range(args.connections):
            raw = socket.create_connection(("127.0.0.1", port), timeout=10)
            try:
                tls = context.wrap_socket(raw, server_hostname="localhost")
                tls.sendall(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: localhost\r\n")
                half.append(tls)
            except OSError:
                refused += 1
                raw.close()
        time.sleep(args.settle)
        print(f"  {len(half)} half-sent open:   RSS {rss_mib(proc.pid):7.1f} MiB, sockets in the server: "
              f"{server_sockets(proc.pid)} (refused while connecting: {refused}), a review answered meanwhile: "
              f"{answers(port, context)}")
        for s in half:
            s.close()
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
