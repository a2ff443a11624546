"""Writing the kubeconfig that points kubectl and the official client at a running kubesim."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml


def kubeconfig_dict(url: str, token: str | None, ca_pem: str | None = None, namespace: str = "default",
                    name: str = "kubesim") -> dict:
    """The kubeconfig document for ``url`` (with the bearer token when auth is on, and the CA for TLS); its
    cluster, user and context are all called ``name`` (another name merges with other kubeconfigs: KUBECONFIG=a:b)."""
    user: dict = {"token": token} if token else {}
    cluster: dict = {"server": url}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem.encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: str, url: str, token: str | None, ca_pem: str | None = None,
                     name: str = "kubesim") -> None:
    """Write the kubeconfig atomically, readable only by the owner (it holds the token)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(kubeconfig_dict(url, token, ca_pem, name=name), f, sort_keys=False)
    os.replace(tmp, target)
