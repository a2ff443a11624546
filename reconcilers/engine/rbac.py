"""The least-privilege ClusterRole opsconsole needs, generated from the registered reconcilers.

Every verb comes from a call the code makes (one ServiceAccount serves web, worker and controller):

- the reconciled resource: `get` (runner, manual-reconcile service), `list`/`watch` (informers), `patch`
  (finalizers, the manual-reconcile and suspension annotations), `update` (a rollback PUTs the restored spec
  with the resourceVersion it read, so a concurrent change is a 409, never overwritten);
- `<plural>/status`: `update` (the runner PUTs status with the resourceVersion it read);
- `<plural>/finalizers`: `update` when the reconciler owns children (its own finalizer is a `patch`): children carry
  `blockOwnerDeletion: true`, and the OwnerReferencesPermissionEnforcement admission plugin only lets a client
  set that when it may update the owner's finalizers;
- owned child kinds: `get`/`create`/`patch` (`Context.apply_child`), `list`/`watch` (informers, children
  pages), `delete` when the reconciler overrides `finalize` (cleanup deletes its children);
- kinds a reconciler only reads (`rbac_reads`, e.g. Memcached's Pods): `get`/`list`;
- roles a reconciler binds (`rbac_binds`): `bind` on exactly those ClusterRoles (see `_bind_rule`);
- `coordination.k8s.io` leases: `create`, and `get`/`update` of the `opsconsole-controller` Lease only;
- core `events`: `create` (the runner's Events), `list`/`watch` (the controller's Events archive);
- the `kube-system` namespace: `get` (the controller reads its uid, the cluster's identity: `engine.clusters`);
- what the archive's owner resolver reads to file an Event about a Pod under its registered owner (Pod →
  ReplicaSet → Deployment → the kind): `get` on core `pods` and apps `replicasets` (owned kinds have it already);
  and what the console's health tree lists below a Deployment (one LIST per kind in a namespace): `list` on them.

`manage.py rbac` prints it; `deploy/kustomize/base/rbac.yaml` and the Helm chart's `files/rbac.yaml` are its
checked-in output (tests keep them current).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import yaml

from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import registry
from reconcilers.engine.controller.leader import LEASE, LEASE_NAME

ROLE_NAME = "opsconsole"
RBAC_GROUP = "rbac.authorization.k8s.io"
#: the kinds whose creation the apiserver guards with the escalation check (RoleBinding → roleRef)
_BINDING_KINDS = {(RBAC_GROUP, "rolebindings"), (RBAC_GROUP, "clusterrolebindings")}

Rule = dict[str, Any]


class RbacError(ValueError):
    """A reconciler's declarations do not give enough to derive its permissions."""


def _overrides_finalize(rec: Reconciler) -> bool:
    return type(rec).finalize is not Reconciler.finalize


def reconciler_permissions(rec: Reconciler) -> dict[tuple[str, str, str], set[str]]:
    """(apiGroup, resource, resourceName or '') → verbs that one reconciler needs."""
    perms: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    own = rec.resource
    perms[(own.group, own.plural, "")] |= {"get", "list", "watch", "patch", "update"}
    perms[(own.group, f"{own.plural}/status", "")] |= {"update"}
    if rec.owns:
        perms[(own.group, f"{own.plural}/finalizers", "")] |= {"update"}
    child_verbs = {"get", "list", "watch", "create", "patch"}
    if _overrides_finalize(rec):
        child_verbs |= {"delete"}
    for child in rec.owns:
        perms[(child.group, child.plural, "")] |= child_verbs
    for kind in rec.rbac_reads:
        perms[(kind.group, kind.plural, "")] |= {"get", "list"}
    binds = rec.rbac_binds
    if any((c.group, c.plural) in _BINDING_KINDS for c in rec.owns) and not binds:
        raise RbacError(
            f"{type(rec).__name__} owns role bindings but declares no rbac_binds: the apiserver refuses to create "
            "a binding unless its creator may `bind` the referenced role (or holds all of its permissions)"
        )
    for role in binds:
        perms[(RBAC_GROUP, "clusterroles", role)] |= {"bind"}
    return perms


def _engine_permissions() -> dict[tuple[str, str, str], set[str]]:
    return {
        (LEASE.group, LEASE.plural, ""): {"create"},
        (LEASE.group, LEASE.plural, LEASE_NAME): {"get", "update"},
        ("", "events", ""): {"create", "list", "watch"},
        ("", "namespaces", "kube-system"): {"get"},
        ("", "pods", ""): {"get", "list"},
        ("apps", "replicasets", ""): {"get", "list"},
    }


def cluster_role_rules(reconcilers: Iterable[Reconciler]) -> list[Rule]:
    """The rules, merged: one rule per (apiGroup, verbs, resourceName) listing its resources, sorted."""
    perms: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for part in [_engine_permissions(), *(reconciler_permissions(r) for r in reconcilers)]:
        for key, verbs in part.items():
            perms[key] |= verbs
    for (group, resource, name), verbs in list(perms.items()):  # a named grant the resource-wide one covers: none
        if name and not verbs - perms.get((group, resource, ""), set()):
            del perms[(group, resource, name)]
    grouped: dict[tuple[str, tuple[str, ...], str], list[str]] = defaultdict(list)
    for (group, resource, name), verbs in perms.items():
        grouped[(group, tuple(sorted(verbs)), name)].append(resource)
    rules: list[Rule] = []
    for (group, verbs, name), resources in sorted(grouped.items()):
        rule: Rule = {"apiGroups": [group], "resources": sorted(resources)}
        if name:
            rule["resourceNames"] = [name]
        rule["verbs"] = list(verbs)
        rules.append(rule)
    return rules


def cluster_role(reconcilers: Iterable[Reconciler] | None = None, name: str = ROLE_NAME) -> dict[str, Any]:
    """The ClusterRole object (defaults to the registered reconcilers)."""
    recs = list(registry.registered() if reconcilers is None else reconcilers)
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "opsconsole"}},
        "rules": cluster_role_rules(recs),
    }


def _bind_comment(recs: list[Reconciler]) -> list[str]:
    lines = []
    for rec in recs:
        for role in rec.rbac_binds:
            lines.append(
                f"# `bind` on ClusterRole {role}: {type(rec).__name__} creates RoleBindings to it. Without `bind` the "
                "apiserver's"
            )
            lines.append("# escalation check would require opsconsole to hold every permission of that role itself.")
    return lines


def cluster_role_yaml(reconcilers: Iterable[Reconciler] | None = None) -> str:
    """The ClusterRole as YAML with a header saying where it comes from."""
    recs = list(registry.registered() if reconcilers is None else reconcilers)
    kinds = ", ".join(f"{r.resource.plural}.{r.resource.group}" for r in recs) or "(none)"
    header = [
        "# Generated by `manage.py rbac` from the registered reconcilers; do not edit by hand.",
        f"# Reconcilers: {kinds}",
        "# Regenerate with: python manage.py rbac > deploy/kustomize/base/rbac.yaml (and the Helm chart's files/)",
        *_bind_comment(recs),
    ]
    body = yaml.safe_dump(cluster_role(recs), sort_keys=False, default_flow_style=False)
    return "\n".join(header) + "\n" + body
