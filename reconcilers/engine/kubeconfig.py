"""Kubeconfig files for several clusters: the current context of a `KUBECONFIG` list as kubectl takes it, and a
kubeconfig renamed to one context so that it merges with others (docs/operations.md, "Many clusters"). No Django,
no client: `reconcilers.engine.kube.build_api_client` uses the first.
"""

from __future__ import annotations

import os

import yaml
from kubernetes.config import ConfigException


def first_current_context(kubeconfig: str) -> str | None:
    """The current context of a kubeconfig list (`a:b`): the first file's, as kubectl takes it (the Python
    client's merge takes the last file's); None for a single file (the client reads it itself). The first file
    missing is a ConfigException, not a reason to take the next one's: a process started before its cluster's
    kubeconfig is written must wait for it, not talk to another cluster meanwhile."""
    paths = [p for p in kubeconfig.split(os.pathsep) if p]
    if len(paths) < 2:
        return None
    try:
        with open(os.path.expanduser(paths[0])) as f:
            current = (yaml.safe_load(f) or {}).get("current-context")
    except FileNotFoundError as exc:
        raise ConfigException(f"the first kubeconfig of {kubeconfig}, {paths[0]}, does not exist") from exc
    return str(current) if current else None


def kubeconfig_with_context(source: str | os.PathLike[str], context: str, target: str | os.PathLike[str]) -> None:
    """Write `source`'s kubeconfig to `target` with its current context, cluster and user all named `context`
    (so that it merges with other kubeconfigs — `KUBECONFIG=a:b` — without their names colliding: kubesim names
    all three 'kubesim'); readable only by the owner, as it holds the credentials."""
    with open(source) as f:
        doc = yaml.safe_load(f)
    current = doc.get("current-context") or doc["contexts"][0]["name"]
    entry = next(c for c in doc["contexts"] if c["name"] == current)
    cluster = next(c for c in doc["clusters"] if c["name"] == entry["context"]["cluster"])
    user = next(u for u in doc.get("users") or [] if u["name"] == entry["context"].get("user"))
    doc.update({"clusters": [{**cluster, "name": context}], "users": [{**user, "name": context}],
                "contexts": [{"name": context, "context": {**entry["context"], "cluster": context, "user": context}}],
                "current-context": context})
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
