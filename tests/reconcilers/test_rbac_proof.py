"""The least-privilege proof: the engine runs on kubesim under `--authorization-mode=RBAC` as a ServiceAccount bound
only to the ClusterRole `manage.py rbac` generates for the registered kinds, as deploy/kustomize runs it (one account
for web, worker and controller).

- Enough: the controller and the workers converge every kind, follow a spec change, roll back, suspend and
  resume, answer the console's reads (health tree, object page) and a manual reconcile, and clean up on deletion
  with not one request refused.
- No more: kubesim logs every authorization decision; every atomic permission of the role (one verb on one
  resource, or one resourceName) is the only grant of at least one request the engine made. Removing any one rule
  therefore refuses a request the engine makes.
- And it fails where it should: with the `memcacheds/status` rule or the `deployments` create rule removed, a new
  Memcached never gets there, and kubesim refused exactly that request.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kubesim.auth.identity import UserInfo
from kubesim.auth.rbac import rule_allows
from kubesim.auth.request_info import Attributes
from kubesim.testing import KubesimHandle, running_kubesim, wait_for
from opsconsole.testing.cluster import CrdInstaller
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import apiclient, dispatch, kube, registry
from reconcilers.engine.rbac import cluster_role
from reconcilers.kinds.memcached import MEMCACHED, MemcachedReconciler
from reconcilers.kinds.tenant import NAMESPACE, TENANT, TenantReconciler
from reconcilers.models import Resource
from reconcilers.services import healing
from reconcilers.services.reconcile_requests import reconcile_request_create
from reconcilers.services.selectors import generic_objects, health_tree
from tests.fixtures.cluster import POD_DELAYS
from tests.fixtures.engines import INTEGRATION_RECONCILERS, Engine, engine_running, wait_idle
from tests.reconcilers.testkinds import GADGET, GadgetReconciler, gadget

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

SERVICE_ACCOUNT = ResourceKind("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
CLUSTER_ROLE = ResourceKind("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDING = ResourceKind("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
                                    namespaced=False)
ACCOUNT = ("opsconsole", "opsconsole")
USER = f"system:serviceaccount:{ACCOUNT[0]}:{ACCOUNT[1]}"


@dataclass
class Proof:
    sim: KubesimHandle
    admin: Any  # an ApiClient with the admin token (system:masters)
    engine: Engine
    kubeconfig: str  # the ServiceAccount's
    role: dict[str, Any]


@pytest.fixture(scope="module")
def proof(redis_client, django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Proof]:
    """kubesim with RBAC on; the account, the generated ClusterRole and its binding made as the admin; the engine
    (controller and two workers) running with the account's token."""
    with running_kubesim(mode="process", authorization_mode="RBAC", history_size=50_000, **POD_DELAYS) as sim:
        admin = kube.build_api_client(sim.kubeconfig)
        CrdInstaller(admin).ensure([MemcachedReconciler, TenantReconciler, GadgetReconciler])
        kube.create_object(admin, NAMESPACE, {"metadata": {"name": ACCOUNT[0]}})
        kube.create_object(admin, SERVICE_ACCOUNT, {"metadata": {"name": ACCOUNT[1], "namespace": ACCOUNT[0]}})
        role = cluster_role([MemcachedReconciler(), TenantReconciler(), GadgetReconciler()])
        kube.create_object(admin, CLUSTER_ROLE, role)
        kube.create_object(admin, CLUSTER_ROLE_BINDING, {
            "metadata": {"name": "opsconsole"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "opsconsole"},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT[1], "namespace": ACCOUNT[0]}]})
        answer = kube.request_json(admin, "POST", f"/api/v1/namespaces/{ACCOUNT[0]}/serviceaccounts/{ACCOUNT[1]}"
                                   "/token", body={"spec": {"expirationSeconds": 7200}})
        kubeconfig = sim.kubeconfig_for(answer["status"]["token"],
                                        str(tmp_path_factory.mktemp("rbac") / "opsconsole.kubeconfig"))
        # exactly the kinds proved (the role is theirs), not every built-in one
        env = {"KUBECONFIG": kubeconfig, "OPSCONSOLE_BUILTIN_KINDS": "0"}
        with engine_running(sim, django_db_blocker, prefix="test-rbac", extra_env=env) as engine:
            yield Proof(sim, admin, engine, kubeconfig, role)
        admin.close()


@pytest.fixture
def proven(proof, transactional_db, settings) -> Iterator[Proof]:
    """This process acts as the web does, with the account's token too; afterwards the engine is idle."""
    settings.OPSCONSOLE_RECONCILERS = INTEGRATION_RECONCILERS
    settings.OPSCONSOLE_WORKQUEUE_NAME = proof.engine.queue_name
    settings.KUBECONFIG = proof.kubeconfig
    registry.reset()
    apiclient.reset()
    health_tree.cache_clear()
    yield proof
    wait_idle(dispatch.get_queue(), timeout=60)
    apiclient.reset()
    registry.reset()


def _row(uid: str) -> Resource | None:
    return Resource.objects.filter(uid=uid).first()


def _at(uid: str, phase: str, generation: int | None = None) -> bool:
    row = _row(uid)
    return bool(row and row.phase == phase and (generation is None or row.generation == generation))


def _memcached(namespace: str, name: str, size: int = 1) -> dict[str, Any]:
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"size": size}}


def _observed(api: Any, namespace: str, name: str, generation: int) -> bool:
    obj = kube.get_object(api, MEMCACHED, namespace, name) or {}
    status = obj.get("status") or {}
    return status.get("observedGeneration") == generation and status.get("phase") == "Running"


def _atoms(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The role as atomic permissions: one verb on one (apiGroup, resource[, resourceName])."""
    atoms = []
    for rule in rules:
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                for verb in rule.get("verbs") or []:
                    for name in rule.get("resourceNames") or [None]:
                        atom = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                        if name:
                            atom["resourceNames"] = [name]
                        atoms.append(atom)
    return atoms


def _attributes(entry: dict[str, Any]) -> Attributes:
    return Attributes(UserInfo(entry["user"]), entry["verb"], entry["resourceRequest"], path=entry["path"],
                      api_group=entry["apiGroup"], namespace=entry["namespace"], resource=entry["resource"],
                      subresource=entry["subresource"], name=entry["name"])


def test_the_generated_role_is_enough_for_everything_the_engine_does_and_no_more(proven, namespace_factory):
    sim, admin = proven.sim, proven.admin
    ns = namespace_factory(admin)
    # the controller created the Lease and leads; every kind converges
    m_uid = kube.create_object(admin, MEMCACHED, _memcached(ns, "cache"))["metadata"]["uid"]
    tenant_name = f"proof-{ns[-6:]}"
    t_uid = kube.create_object(admin, TENANT, {"apiVersion": "tenancy.example.com/v1alpha1", "kind": "Tenant",
                                               "metadata": {"name": tenant_name},
                                               "spec": {"admins": ["alice"], "quota": {"cpu": "2", "pods": 10}}}
                               )["metadata"]["uid"]
    g_uid = kube.create_object(admin, GADGET, gadget(ns, "widget", mode="ok"))["metadata"]["uid"]
    for uid in (m_uid, t_uid, g_uid):
        wait_for(lambda u=uid: _at(u, "Running"), timeout=45, interval=0.2)
    # each kind: a spec change, then a rollback to generation 1 (the rollback PUTs the spec: generation 3)
    changes = [(m_uid, MEMCACHED, ns, "cache", {"spec": {"size": 2}}),
               (t_uid, TENANT, None, tenant_name, {"spec": {"quota": {"cpu": "3", "pods": 10}}}),
               (g_uid, GADGET, ns, "widget", {"spec": {"note": "second"}})]
    for _uid, kind, where, name, patch in changes:
        kube.patch_object(admin, kind, where, name, patch)
    for uid, *_ in changes:
        wait_for(lambda u=uid: _at(u, "Running", 2), timeout=45, interval=0.2)
    for uid, *_ in changes:
        healing.resource_rollback(_row(uid), 1, actor="user:proof", reason="the proof rolls back")
    for uid, *_ in changes:
        wait_for(lambda u=uid: _at(u, "Running", 3), timeout=45, interval=0.2)
    wait_for(lambda: _observed(admin, ns, "cache", 3), timeout=45, interval=0.2)
    # suspend and resume; a manual reconcile; the console's reads
    healing.resource_suspend(_row(m_uid), actor="user:proof", reason="the proof suspends")
    healing.resource_resume(_row(m_uid), actor="user:proof", reason="the proof resumes")
    reconcile_request_create(_row(m_uid), actor="user:proof", reason="the proof asks")
    kinds = set()
    for uid in (m_uid, t_uid):  # the health trees, and the object page of every node in them
        for node in health_tree.resource_tree(_row(uid)).rows()[1:]:
            kind = ResourceKind(node.group, node.version, node.plural, node.kind, namespaced=bool(node.namespace))
            page = generic_objects.object_page(kind, node.namespace, node.name)
            assert page.obj["metadata"]["name"] == node.name and not page.error
            kinds.add(node.kind)
    assert kinds >= {"Deployment", "ReplicaSet", "Pod", "Service", "Namespace", "ResourceQuota", "RoleBinding"}
    # deletion: finalizers run, children go
    kube.delete_object(admin, MEMCACHED, ns, "cache")
    kube.delete_object(admin, TENANT, None, tenant_name)
    kube.delete_object(admin, GADGET, ns, "widget")
    for uid in (m_uid, t_uid, g_uid):
        wait_for(lambda u=uid: bool(_row(u) and _row(u).deleted), timeout=45, interval=0.2)
    wait_idle(dispatch.get_queue(), timeout=60)

    log = sim.access_log(USER)
    refused = [e for e in log if not e["allowed"]]
    assert not refused, f"the engine was refused under its own role: {refused[:10]}"
    requests = [_attributes(e) for e in log if e["resourceRequest"]]
    atoms = _atoms(proven.role["rules"])
    unneeded = []
    for atom in atoms:
        others = [a for a in atoms if a is not atom]
        sole = [r for r in requests if rule_allows(atom, r) and not any(rule_allows(o, r) for o in others)]
        if not sole:
            unneeded.append(atom)
    assert not unneeded, f"permissions of the role that no request needed: {unneeded}"
    print(f"\nRBAC proof: {len(log)} decisions for {USER}, none refused; each of the role's {len(atoms)} "
          f"atomic permissions was the only grant of at least one request")


@pytest.mark.parametrize("removed", [("cache.example.com", "memcacheds/status", "update"),
                                     ("apps", "deployments", "create")])
def test_without_one_rule_the_engine_is_refused_exactly_there_and_does_not_converge(proven, namespace_factory,
                                                                                   removed):
    sim, admin = proven.sim, proven.admin
    ns = namespace_factory(admin)
    group, resource, verb = removed
    narrowed = copy.deepcopy(proven.role)  # the same role as atomic rules, less that one verb on that resource
    narrowed["rules"] = [a for a in _atoms(proven.role["rules"])
                         if (a["apiGroups"][0], a["resources"][0], a["verbs"][0]) != removed]
    assert len(narrowed["rules"]) == len(_atoms(proven.role["rules"])) - 1
    current = kube.get_object(admin, CLUSTER_ROLE, None, "opsconsole")
    kube.replace_object(admin, CLUSTER_ROLE,
                        {**narrowed, "metadata": {**narrowed["metadata"],
                                                  "resourceVersion": current["metadata"]["resourceVersion"]}})
    sim.clear_access_log()
    try:
        uid = kube.create_object(admin, MEMCACHED, _memcached(ns, "narrow"))["metadata"]["uid"]
        base, _, sub = resource.partition("/")

        def refused_there() -> list[dict[str, Any]]:
            return [e for e in sim.access_log(USER, allowed=False)
                    if (e["apiGroup"], e["resource"], e["subresource"], e["verb"]) == (group, base, sub, verb)]

        refusals = wait_for(refused_there, timeout=30, interval=0.2)
        assert all(e["namespace"] == ns for e in refusals)
        assert not _observed(admin, ns, "narrow", 1)
        assert not _at(uid, "Running")
        other = {(e["apiGroup"], e["resource"], e["subresource"], e["verb"])
                 for e in sim.access_log(USER, allowed=False)} - {(group, base, sub, verb)}
        assert not other, f"refused elsewhere too: {other}"
    finally:
        current = kube.get_object(admin, CLUSTER_ROLE, None, "opsconsole")
        kube.replace_object(admin, CLUSTER_ROLE,
                            {**proven.role, "metadata": {**proven.role["metadata"],
                                                         "resourceVersion": current["metadata"]["resourceVersion"]}})
    wait_for(lambda: _at(uid, "Running"), timeout=45, interval=0.2)  # with the rule back it converges
    kube.delete_object(admin, MEMCACHED, ns, "narrow")
    wait_for(lambda: bool(_row(uid) and _row(uid).deleted), timeout=45, interval=0.2)


@pytest.fixture
def namespace_factory():
    import uuid

    def make(api: Any) -> str:
        name = f"p-{uuid.uuid4().hex[:8]}"
        kube.create_object(api, NAMESPACE, {"metadata": {"name": name}})
        return name

    return make
