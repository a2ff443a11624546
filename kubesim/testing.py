"""Test harness: ``running_kubesim()`` starts kubesim on a free 127.0.0.1 port and yields a handle.

    with running_kubesim() as k:
        api = kubernetes.client.CoreV1Api(k.api_client())
        k.set_faults(error_rate=0.5, error_code=429)

By default the server runs in a background thread with its own event loop (``mode="thread"``);
``mode="process"`` runs ``python -m kubesim`` as a subprocess instead.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

from kubesim.kubeconfig import write_kubeconfig
from kubesim.options import Faults, KubeletOptions, Options

_OPTION_NAMES = {f.name for f in fields(Options)} - {"kubelet", "faults", "token", "data_dir"}
_KUBELET_NAMES = {f.name for f in fields(KubeletOptions)}
_FAULT_NAMES = {f.name for f in fields(Faults)}


def build_options(data_dir: str | None, token: str | None, **options: Any) -> Options:
    """Options from keyword arguments: any Options, KubeletOptions or Faults field by name
    (fault fields may also be given with a ``fault_`` prefix)."""
    opts = Options(port=0, token=token, data_dir=data_dir)
    for key, value in options.items():
        if key in _OPTION_NAMES:
            setattr(opts, key, value)
        elif key in _KUBELET_NAMES:
            setattr(opts.kubelet, key, value)
        elif key.removeprefix("fault_") in _FAULT_NAMES:
            opts.faults.update({key.removeprefix("fault_"): value})
        else:
            raise TypeError(f"running_kubesim() got an unexpected option {key!r}")
    return opts


class _ThreadServer:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.sim: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.port = 0

    def start(self) -> int:
        ready = threading.Event()

        def run() -> None:
            from kubesim.simulator import Simulator

            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self.loop = loop
            try:
                self.sim = Simulator(self.options)
                self.port = loop.run_until_complete(self.sim.start())
            except BaseException as e:  # noqa: BLE001 - reported to the starting thread
                self.error = e
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.sim.stop())
                pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for t in pending:
                    t.cancel()
                if pending:
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.close()

        self.thread = threading.Thread(target=run, name="kubesim", daemon=True)
        self.thread.start()
        if not ready.wait(30):
            raise RuntimeError("kubesim did not start within 30 s")
        if self.error is not None:
            raise RuntimeError(f"kubesim failed to start: {self.error}") from self.error
        return self.port

    def stop(self) -> None:
        if self.loop is not None and self.thread is not None and self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(30)
        self.thread = None


class _ProcessServer:
    def __init__(self, options: Options, kubeconfig: str) -> None:
        self.options = options
        self.kubeconfig = kubeconfig
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> int:
        o = self.options
        cmd = [sys.executable, "-m", "kubesim", "--host", o.host, "--port", str(o.port), "--kubeconfig",
               self.kubeconfig, "--history-size", str(o.history_size), "--bookmark-interval",
               str(o.bookmark_interval), "--schedule-delay", str(o.kubelet.schedule_delay), "--start-delay",
               str(o.kubelet.start_delay), "--ready-delay", str(o.kubelet.ready_delay), "--terminate-delay",
               str(o.kubelet.terminate_delay), "--image-pull-backoff", str(o.kubelet.image_pull_backoff),
               "--image-pull-backoff-max", str(o.kubelet.image_pull_backoff_max), "--log-level", "WARNING"]
        for marker in o.kubelet.broken_image_markers:
            cmd += ["--broken-image-marker", marker]
        for marker in o.kubelet.crash_image_markers:
            cmd += ["--crash-image-marker", marker]
        cmd += [f"--token={o.token}"] if o.token else ["--no-auth"]  # a token may begin with "-"
        if o.token and not o.tls:
            cmd.append("--no-tls")
        if o.tls_cert and o.tls_key:
            cmd += ["--tls-cert", o.tls_cert, "--tls-key", o.tls_key]
        if o.data_dir:
            cmd += ["--data-dir", o.data_dir]
        if not o.controllers:
            cmd.append("--no-controllers")
        cmd += ["--authorization-mode", o.authorization_mode]
        if o.webhook_client_cert and o.webhook_client_key:
            cmd += ["--webhook-client-cert", o.webhook_client_cert, "--webhook-client-key", o.webhook_client_key]
        if o.token_auth_file:
            cmd += ["--token-auth-file", o.token_auth_file]
        f = o.faults
        cmd += ["--fault-error-rate", str(f.error_rate), "--fault-error-code", str(f.error_code),
                "--fault-retry-after", str(f.retry_after), "--fault-latency-ms", str(f.latency * 1000),
                "--fault-latency-rate", str(f.latency_rate), "--fault-watch-cut-after", str(f.watch_cut_after),
                "--fault-watch-cut-interval", str(f.watch_cut_interval)]
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("kubesim serving "):
            self.proc.kill()
            raise RuntimeError(f"kubesim subprocess failed to start: {line!r}")
        url = line.split()[2]
        self.port = int(url.rsplit(":", 1)[1])
        return self.port

    def certificate_pem(self) -> str | None:
        import yaml

        with open(self.kubeconfig) as f:
            cluster = yaml.safe_load(f)["clusters"][0]["cluster"]
        data = cluster.get("certificate-authority-data")
        return base64.b64decode(data).decode() if data else None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class KubesimHandle:
    """A running kubesim: where it is, how to reach it and how to make it misbehave."""

    def __init__(self, options: Options, kubeconfig: str, mode: str) -> None:
        self.options = options
        self.kubeconfig = kubeconfig
        self.mode = mode
        self.token = options.token
        self.data_dir = options.data_dir
        self._server: _ThreadServer | _ProcessServer | None = None
        self.url = ""
        self.ca_pem: str | None = None

    @property
    def simulator(self) -> Any:
        """The in-process Simulator (thread mode only); touch it only from its loop."""
        return self._server.sim if isinstance(self._server, _ThreadServer) else None

    def start(self) -> None:
        """Start the server (on the same port again after a stop)."""
        if self.mode == "thread":
            self._server = _ThreadServer(self.options)
        else:
            self._server = _ProcessServer(self.options, self.kubeconfig)
        port = self._server.start()
        self.options.port = port
        self.url = f"{'https' if self.options.tls else 'http'}://{self.options.host}:{port}"
        if isinstance(self._server, _ThreadServer):
            self.ca_pem = self._server.sim.certificate_pem()
            write_kubeconfig(self.kubeconfig, self.url, self.token, self.ca_pem)
        else:
            self.ca_pem = self._server.certificate_pem()

    def kubeconfig_for(self, token: str, path: str) -> str:
        """Write a kubeconfig for this server that authenticates with `token` (a token-file user's, a
        ServiceAccount's) instead of the admin's; returns `path`."""
        write_kubeconfig(path, self.url, token, self.ca_pem)
        return path

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    def restart(self) -> None:
        """Stop and start again on the same port and data directory."""
        self.stop()
        self.start()

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` configured from the kubeconfig."""
        from kubernetes import config

        return config.new_client_from_config(config_file=self.kubeconfig)

    # ---- admin endpoint ---------------------------------------------------------------------------
    def _admin(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        ctx = ssl.create_default_context(cadata=self.ca_pem) if self.ca_pem else None
        with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
            return json.loads(resp.read().decode())

    def set_faults(self, **faults: Any) -> dict[str, Any]:
        """Change fault settings: error_rate, error_code (500/429/503), retry_after, latency (s), latency_rate,
        watch_cut_after, watch_cut_interval (s), methods. Returns the full settings."""
        return self._admin("PATCH", "/kubesim/faults", faults)

    def clear_faults(self) -> dict[str, Any]:
        """Remove every fault."""
        return self._admin("DELETE", "/kubesim/faults")

    def faults(self) -> dict[str, Any]:
        """The current fault settings."""
        return self._admin("GET", "/kubesim/faults")

    def image_markers(self) -> dict[str, list[str]]:
        """The simulated kubelet's failure markers: {"broken": [...], "crash": [...]} (see the README)."""
        kubelet = self.options.kubelet
        return {"broken": list(kubelet.broken_image_markers), "crash": list(kubelet.crash_image_markers)}

    def set_image_markers(self, *, broken: list[str] | None = None, crash: list[str] | None = None) -> None:
        """Replace the failure markers of a running kubesim (thread mode only: a process-mode kubesim takes them
        as options when it starts): image tags containing a `broken` marker never pull, tags containing a
        `crash` marker crash-loop. Each list is swapped whole, so the kubelet's loop reads one or the other."""
        if self.mode != "thread":
            raise RuntimeError("image markers change at run time in thread mode only; start a process-mode kubesim "
                               "with broken_image_markers=[...] / crash_image_markers=[...] instead")
        kubelet = self.options.kubelet
        if broken is not None:
            kubelet.broken_image_markers = [str(m) for m in broken]
        if crash is not None:
            kubelet.crash_image_markers = [str(m) for m in crash]

    def fail_pod(self, namespace: str, name: str, *, reason: str = "Error", message: str = "",
                 exit_code: int = 1) -> dict[str, Any]:
        """Terminate a Pod's containers with ``exit_code`` (the Pod becomes Failed)."""
        return self._admin("POST", f"/kubesim/pods/{namespace}/{name}/fail",
                           {"reason": reason, "message": message, "exitCode": exit_code})

    def stats(self) -> dict[str, Any]:
        """resourceVersion, object count, open watches, injected errors, delayed requests, watches cut."""
        return self._admin("GET", "/kubesim/stats")

    def access_log(self, user: str | None = None, *, allowed: bool | None = None) -> list[dict[str, Any]]:
        """The authorization decisions kubesim made under RBAC, oldest first (of `user` only; only allowed or
        only refused ones): user, verb, resourceRequest, apiGroup, resource, subresource, namespace, name, path,
        allowed."""
        query = urllib.parse.urlencode({k: v for k, v in (("user", user), ("allowed", allowed)) if v is not None})
        return self._admin("GET", "/kubesim/access" + (f"?{query}" if query else ""))["items"]

    def clear_access_log(self) -> None:
        """Forget the decisions recorded so far."""
        self._admin("DELETE", "/kubesim/access")


@contextmanager
def running_kubesim(*, data_dir: str | None = None, token: str | None = "test-token", mode: str = "thread",
                    kubeconfig: str | None = None, **options: Any) -> Iterator[KubesimHandle]:
    """Run kubesim for the duration of the ``with`` block on a free 127.0.0.1 port."""
    if mode not in ("thread", "process"):
        raise ValueError("mode must be 'thread' or 'process'")
    opts = build_options(data_dir, token, **options)
    with tempfile.TemporaryDirectory(prefix="kubesim-") as tmp:
        handle = KubesimHandle(opts, kubeconfig or os.path.join(tmp, "kubeconfig"), mode)
        handle.start()
        try:
            yield handle
        finally:
            handle.stop()


def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll ``predicate()`` until it returns something truthy; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s (last value: {last!r})")
