"""The Simulator: one store, registry and cluster, the HTTP server and the simulated controllers."""

from __future__ import annotations

import asyncio
import logging
import ssl
import tempfile
from collections import Counter, deque
from typing import Any

from aiohttp import web

from kubesim import errors
from kubesim.auth.identity import Authenticator, read_token_file
from kubesim.auth.rbac import RBACAuthorizer, bootstrap_policy
from kubesim.auth.request_info import Attributes
from kubesim.cluster import Cluster
from kubesim.controllers import ControllerManager
from kubesim.meta import clone, now
from kubesim.nodes import ensure_nodes
from kubesim.options import Options
from kubesim.persistence import Persistence
from kubesim.registry.builtins import builtin_registry
from kubesim.server.admission import AdmissionChain
from kubesim.server.app import build_app
from kubesim.server.conversion import conversion_functions
from kubesim.store import Store
from kubesim.tls import ensure_certificate, server_context

log = logging.getLogger("kubesim")
ACCESS_LOG_SIZE = 200_000
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class Simulator:
    """A whole simulated cluster; ``await start()`` serves it, ``await stop()`` ends it cleanly."""

    def __init__(self, options: Options | None = None) -> None:
        self.options = options or Options()
        self.store = Store(self.options.history_size)
        self.registry = builtin_registry()
        self.cluster = Cluster(self.store, self.registry)
        self.cluster.conversion = lambda crd, rt: conversion_functions(self, crd, rt)
        self.persistence = Persistence(self.options.data_dir) if self.options.data_dir else None
        self.controllers = ControllerManager(self)
        if self.options.authorization_mode not in ("AlwaysAllow", "RBAC"):
            raise ValueError(f"authorization mode must be AlwaysAllow or RBAC, got {self.options.authorization_mode!r}")
        static = read_token_file(self.options.token_auth_file) if self.options.token_auth_file else None
        self.authenticator = Authenticator(self.options.token, static)
        self.authorizer = (RBACAuthorizer(self.cluster, self.authorize) if self.options.authorization_mode == "RBAC"
                           else None)
        self.admission = AdmissionChain(self)
        #: under RBAC, every authorization decision (newest last): who asked to do what, and the answer
        self.access_log: deque[dict[str, Any]] = deque(maxlen=ACCESS_LOG_SIZE)
        self.active_watches = 0
        self.injected_errors = 0
        self.delayed_requests = 0  # requests the latency fault slowed down
        self.watches_cut = 0  # watch connections the watch_cut_interval fault dropped
        #: resource requests served, by `verb resource[/subresource]` (kube-apiserver's apiserver_request_total)
        self.request_counts: Counter[str] = Counter()
        self.port: int | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """The base URL clients use."""
        scheme = "https" if self.options.tls else "http"
        host = "127.0.0.1" if self.options.host in ("0.0.0.0", "") else self.options.host
        return f"{scheme}://{host}:{self.port}"

    def certificate_pem(self) -> str | None:
        """The serving certificate (to trust as the CA), when serving TLS."""
        if not self.options.tls or not self.options.tls_cert:
            return None
        with open(self.options.tls_cert) as f:
            return f.read()

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self.options.tls:
            return None
        if not (self.options.tls_cert and self.options.tls_key):
            directory = self.options.data_dir or tempfile.mkdtemp(prefix="kubesim-tls-")
            self.options.tls_cert, self.options.tls_key = ensure_certificate(directory, self.options.host)
        return server_context(self.options.tls_cert, self.options.tls_key)

    def bootstrap(self) -> None:
        """Load persisted state and make sure the default namespaces exist; a new cluster registers its Nodes."""
        if self.persistence is not None:
            self.persistence.load(self.store)
        self.cluster.sync_crd_types()
        ns_rt = self.cluster.resource("", "namespaces")
        for name in DEFAULT_NAMESPACES:
            if self.cluster.find(ns_rt, "", name) is None:
                self.cluster.create(ns_rt, "", {"metadata": {"name": name}})
        if self.authorizer is not None:
            self._bootstrap_rbac()
        ensure_nodes(self.cluster, self.options)

    def _bootstrap_rbac(self) -> None:
        """The default ClusterRoles and ClusterRoleBindings of a new cluster, created when missing."""
        roles, bindings = bootstrap_policy()
        for plural, objects in (("clusterroles", roles), ("clusterrolebindings", bindings)):
            rt = self.cluster.resource("rbac.authorization.k8s.io", plural)
            for obj in objects:
                if self.cluster.find(rt, "", obj["metadata"]["name"]) is None:
                    self.cluster.create(rt, "", obj)

    def authorize(self, attrs: Attributes) -> bool:
        """Under RBAC, the decision on `attrs`, recorded on the access log (requests, and the checks made while
        serving one: `bind`/`escalate` on roles, `update` on an owner's finalizers); AlwaysAllow: True."""
        if self.authorizer is None:
            return True
        allowed, _reason = self.authorizer.authorize(attrs)
        self.access_log.append({"user": attrs.user.name, "verb": attrs.verb, "resourceRequest": attrs.resource_request,
                                "apiGroup": attrs.api_group, "resource": attrs.resource,
                                "subresource": attrs.subresource, "namespace": attrs.namespace, "name": attrs.name,
                                "path": attrs.path, "allowed": allowed})
        return allowed

    def service_account_uid(self, namespace: str, name: str) -> str | None:
        """The uid of a stored ServiceAccount (None when there is none)."""
        obj = self.cluster.find(self.cluster.resource("", "serviceaccounts"), namespace, name)
        return obj["metadata"]["uid"] if obj else None

    async def start(self) -> int:
        """Bootstrap, start the controllers and listen; returns the bound port."""
        self.bootstrap()
        if self.options.controllers:
            self.controllers.start()
        app = build_app(self)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.options.host, self.options.port, reuse_address=True,
                           ssl_context=self._ssl_context())
        await site.start()
        server = site._server  # noqa: SLF001 - aiohttp exposes no public accessor for the bound port
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self.options.port
        log.info("kubesim serving on %s", self.url)
        return self.port

    async def stop(self) -> None:
        """Stop serving: end watches, stop controllers, write the final snapshot."""
        self.store.close_all_watchers()
        await self.controllers.stop()
        await self.admission.close()
        if self._runner is not None:
            await asyncio.sleep(0)
            await self._runner.cleanup()
            self._runner = None
        if self.persistence is not None:
            self.persistence.close()
            self.store.journal = None

    def fail_pod(self, namespace: str, name: str, *, reason: str = "Error", message: str = "",
                 exit_code: int = 1) -> dict[str, Any]:
        """Make a Pod's containers terminate with ``exit_code``; the Pod becomes Failed."""
        rt = self.cluster.resource("", "pods")
        pod = self.cluster.get(rt, namespace, name)
        if pod["metadata"].get("deletionTimestamp"):
            raise errors.bad_request(f'pod "{name}" is being deleted')
        stamp = now()
        new = clone(pod)
        status = new.setdefault("status", {})
        status["phase"] = "Failed"
        status["reason"] = reason
        status["message"] = message or f"container exited with code {exit_code}"
        statuses = []
        for c in (pod.get("spec") or {}).get("containers") or []:
            prev = next((s for s in status.get("containerStatuses") or [] if s.get("name") == c["name"]), {})
            statuses.append({
                "name": c["name"], "image": c.get("image", ""), "imageID": prev.get("imageID", ""),
                "ready": False, "started": False, "restartCount": prev.get("restartCount", 0),
                "state": {"terminated": {"exitCode": exit_code, "reason": reason, "message": status["message"],
                                         "startedAt": (prev.get("state") or {}).get("running", {}).get("startedAt",
                                                                                                        stamp),
                                         "finishedAt": stamp}},
            })
        status["containerStatuses"] = statuses
        conds = [c for c in status.get("conditions") or [] if c.get("type") not in ("Ready", "ContainersReady")]
        for t in ("ContainersReady", "Ready"):
            conds.append({"type": t, "status": "False", "reason": "PodFailed", "lastProbeTime": None,
                          "lastTransitionTime": stamp})
        status["conditions"] = conds
        return self.cluster.update(rt, namespace, name, new, subresource="status")
