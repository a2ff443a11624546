"""This process's Kubernetes ApiClient, configured from the settings.

`get_api_client()` builds it once per process (a forked worker builds its own: connections do not survive
fork) from `settings.KUBECONFIG` when set, the in-cluster service account when `KUBERNETES_SERVICE_HOST` is set
(inside a Pod), else the kubeconfig kubesim writes (`settings.KUBESIM_KUBECONFIG`). `reset()` forgets it (tests
that point the settings at another cluster). The Django-free helpers that use the client are in
`reconcilers.engine.kube`.
"""

from __future__ import annotations

import os
import threading

from django.conf import settings
from kubernetes import client as k8s

from reconcilers.engine import kube

_shared: dict[int, k8s.ApiClient] = {}
_lock = threading.Lock()


def kubeconfig_configured() -> str | None:
    """The kubeconfig the settings name (None: the in-cluster service account)."""
    if settings.KUBECONFIG:
        return str(settings.KUBECONFIG)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    return str(settings.KUBESIM_KUBECONFIG)


def get_api_client() -> k8s.ApiClient:
    """This process's shared ApiClient."""
    pid = os.getpid()
    with _lock:
        api = _shared.get(pid)
        if api is None:
            _shared.clear()
            api = _shared[pid] = kube.build_api_client(kubeconfig_configured())
        return api


def reset() -> None:
    """Forget the shared client (the next `get_api_client()` reads the settings again)."""
    with _lock:
        _shared.clear()
