"""kubesim under `--authorization-mode=RBAC`, through the official client and kubectl: identities from a token file
and from ServiceAccount tokens; 403 Forbidden with kube-apiserver's message; Roles, ClusterRoles (aggregation),
RoleBindings, ClusterRoleBindings over verbs, subresources, resourceNames and non-resource URLs; escalation
refused; the access and rules reviews (`kubectl auth can-i`, `--list`, `kubectl auth whoami`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from kubesim.testing import KubesimHandle, running_kubesim
from tests.kubesim.conftest import WIDGET_CRD, raw

KUBECTL = shutil.which("kubectl") or "/usr/local/bin/kubectl"
RBAC = "rbac.authorization.k8s.io"
TOKENS = {"alice": "alice-token", "bob": "bob-token", "carol": "carol-token"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KubesimHandle]:
    """RBAC on, TLS (kubectl sends tokens over TLS only), three users from a token file: alice (group devs),
    bob (group ops), carol (no group of her own)."""
    path = tmp_path_factory.mktemp("tokens") / "tokens.csv"
    path.write_text('# token,user,uid,"groups"\n'
                    'alice-token,alice,u-alice,"devs"\n'
                    'bob-token,bob,u-bob,"ops,oncall"\n'
                    "carol-token,carol,u-carol\n")
    with running_kubesim(tls=True, authorization_mode="RBAC", token_auth_file=str(path),
                         schedule_delay=0.01, start_delay=0.05, ready_delay=0.05) as k:
        client.ApiextensionsV1Api(k.api_client()).create_custom_resource_definition(WIDGET_CRD)
        yield k


@pytest.fixture(scope="module")
def admin(cluster) -> client.ApiClient:
    return cluster.api_client()


def client_as(cluster: KubesimHandle, token: str, tmp: Path) -> client.ApiClient:
    """An ApiClient on the cluster with `token` instead of the admin's."""
    from kubernetes import config

    return config.new_client_from_config(
        config_file=cluster.kubeconfig_for(token, str(tmp / f"kubeconfig-{uuid.uuid4().hex[:6]}")))


@pytest.fixture
def as_user(cluster, tmp_path) -> Callable[[str], client.ApiClient]:
    return lambda name: client_as(cluster, TOKENS.get(name, name), tmp_path)


@pytest.fixture
def kubectl_as(cluster, tmp_path) -> Callable[..., subprocess.CompletedProcess]:
    def run(token: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        path = cluster.kubeconfig_for(TOKENS.get(token, token), str(tmp_path / f"kc-{uuid.uuid4().hex[:6]}"))
        env = dict(os.environ, KUBECONFIG=path, HOME=str(tmp_path))
        proc = subprocess.run([KUBECTL, "--cache-dir", str(tmp_path / "cache"), *args], env=env,
                              capture_output=True, text=True, timeout=30)
        if check and proc.returncode not in (0, 1):
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    return run


@pytest.fixture
def ns(admin) -> str:
    name = f"r-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(admin).create_namespace({"metadata": {"name": name}})
    return name


def role(name: str, rules: list[dict], namespace: str | None = None, kind: str = "Role") -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": meta, "rules": rules}


def binding(name: str, role_kind: str, role_name: str, subjects: list[dict], namespace: str | None = None,
            kind: str = "RoleBinding") -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": meta, "subjects": subjects,
            "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role_name}}


def user(name: str) -> dict:
    return {"apiGroup": RBAC, "kind": "User", "name": name}


def group(name: str) -> dict:
    return {"apiGroup": RBAC, "kind": "Group", "name": name}


def forbidden(call: Callable[[], object]) -> dict:
    with pytest.raises(client.ApiException) as info:
        call()
    assert info.value.status == 403, info.value.body
    import json

    return json.loads(info.value.body)


def test_an_unbound_user_is_refused_with_the_apiservers_message(cluster, as_user, ns):
    status = forbidden(lambda: client.CoreV1Api(as_user("carol")).list_namespaced_pod(ns))
    assert status["reason"] == "Forbidden" and status["code"] == 403
    assert status["message"] == (f'pods is forbidden: User "carol" cannot list resource "pods" in API group "" '
                                 f'in the namespace "{ns}"')
    assert status["details"] == {"kind": "pods"}
    status = forbidden(lambda: client.AppsV1Api(as_user("carol")).read_namespaced_deployment("web", ns))
    assert status["message"] == (f'deployments.apps "web" is forbidden: User "carol" cannot get resource '
                                 f'"deployments" in API group "apps" in the namespace "{ns}"')
    status = forbidden(lambda: client.CoreV1Api(as_user("carol")).list_node())
    assert status["message"].endswith('cannot list resource "nodes" in API group "" at the cluster scope')
    refused = cluster.access_log("carol", allowed=False)  # each decision is on kubesim's access log
    assert {(e["verb"], e["resource"], e["namespace"], e["name"]) for e in refused} >= {
        ("list", "pods", ns, ""), ("get", "deployments", ns, "web"), ("list", "nodes", "", "")}


def test_an_unknown_token_is_unauthorized_and_discovery_is_open_to_every_user(cluster, as_user):
    with pytest.raises(client.ApiException) as info:
        client.CoreV1Api(as_user("nobody-token")).list_namespace()
    assert info.value.status == 401
    assert client.CoreApi(as_user("carol")).get_api_versions().versions == ["v1"]  # system:discovery


def test_a_role_binding_grants_in_its_namespace_only_by_user_and_by_group(admin, as_user, ns):
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role(ns, role("pod-reader", [{"apiGroups": [""], "resources": ["pods"],
                                                         "verbs": ["get", "list", "watch"]}]))
    rbac.create_namespaced_role_binding(ns, binding("devs-read", "Role", "pod-reader", [group("devs")]))
    rbac.create_namespaced_role_binding(ns, binding("carol-read", "Role", "pod-reader", [user("carol")]))
    assert client.CoreV1Api(as_user("alice")).list_namespaced_pod(ns).items == []
    assert client.CoreV1Api(as_user("carol")).list_namespaced_pod(ns).items == []
    forbidden(lambda: client.CoreV1Api(as_user("bob")).list_namespaced_pod(ns))  # not in devs
    forbidden(lambda: client.CoreV1Api(as_user("alice")).list_namespaced_pod("default"))  # another namespace
    forbidden(lambda: client.CoreV1Api(as_user("alice")).create_namespaced_pod(ns, {
        "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))  # no create


def test_subresources_resource_names_and_wildcards(admin, as_user, ns, cluster):
    custom = client.CustomObjectsApi(admin)
    custom.create_namespaced_custom_object("example.com", "v1", ns, "widgets", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 1}})
    custom.create_namespaced_custom_object("example.com", "v1", ns, "widgets", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": 1}})
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role(ns, role("status-writer", [
        {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"], "resourceNames": ["w1"]},
        {"apiGroups": ["example.com"], "resources": ["widgets/status"], "verbs": ["patch"]}]))
    rbac.create_namespaced_role_binding(ns, binding("bob-status", "Role", "status-writer", [user("bob")]))
    bob = client.CustomObjectsApi(as_user("bob"))
    assert bob.get_namespaced_custom_object("example.com", "v1", ns, "widgets", "w1")["metadata"]["name"] == "w1"
    status = forbidden(lambda: bob.get_namespaced_custom_object("example.com", "v1", ns, "widgets", "w2"))
    assert status["message"].startswith('widgets.example.com "w2" is forbidden: User "bob" cannot get resource')
    forbidden(lambda: bob.list_namespaced_custom_object("example.com", "v1", ns, "widgets"))  # names: no list
    patched = bob.patch_namespaced_custom_object_status("example.com", "v1", ns, "widgets", "w2",
                                                        {"status": {"phase": "Ready"}})
    assert patched["status"]["phase"] == "Ready"
    status = forbidden(lambda: bob.patch_namespaced_custom_object("example.com", "v1", ns, "widgets", "w2",
                                                                  {"spec": {"size": 2}}))
    assert 'cannot patch resource "widgets" in API group "example.com"' in status["message"]
    # */status and a non-resource URL through a ClusterRole
    rbac.create_cluster_role(role(f"status-{ns}", [{"apiGroups": ["*"], "resources": ["*/status"],
                                                    "verbs": ["get"]},
                                                   {"nonResourceURLs": ["/kubesim/*"], "verbs": ["get"]}],
                                  kind="ClusterRole"))
    rbac.create_cluster_role_binding(binding(f"carol-status-{ns}", "ClusterRole", f"status-{ns}", [user("carol")],
                                             kind="ClusterRoleBinding"))
    carol = client.CustomObjectsApi(as_user("carol"))
    assert carol.get_namespaced_custom_object_status("example.com", "v1", ns, "widgets", "w1")["metadata"]
    forbidden(lambda: carol.get_namespaced_custom_object("example.com", "v1", ns, "widgets", "w1"))
    carol_raw = as_user("carol")
    assert "objects" in raw(carol_raw, "GET", "/kubesim/stats")
    status = forbidden(lambda: raw(carol_raw, "POST", "/version/x", body={}))
    assert status["message"] == 'forbidden: User "carol" cannot post path "/version/x"'


def test_an_aggregated_cluster_role_gains_the_rules_of_the_roles_it_selects(admin, as_user, ns):
    rbac = client.RbacAuthorizationV1Api(admin)
    label = f"example.com/aggregate-to-{ns}"
    rbac.create_cluster_role({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
                              "metadata": {"name": f"agg-{ns}"},
                              "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]}})
    rbac.create_namespaced_role_binding(ns, binding("ops-agg", "ClusterRole", f"agg-{ns}", [group("oncall")]))
    forbidden(lambda: client.CoreV1Api(as_user("bob")).list_namespaced_config_map(ns))
    rbac.create_cluster_role({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
                              "metadata": {"name": f"cm-{ns}", "labels": {label: "true"}},
                              "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})
    assert client.CoreV1Api(as_user("bob")).list_namespaced_config_map(ns).items is not None
    # the built-in admin role aggregates edit and view: an admin of a namespace reads and writes its pods
    rbac.create_namespaced_role_binding(ns, binding("carol-admin", "ClusterRole", "admin", [user("carol")]))
    core = client.CoreV1Api(as_user("carol"))
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c1"}})
    assert [c.metadata.name for c in core.list_namespaced_config_map(ns).items] == ["c1"]


def test_service_account_tokens_authenticate_as_the_account_until_it_is_deleted(admin, cluster, ns, tmp_path):
    core = client.CoreV1Api(admin)
    core.create_namespaced_service_account(ns, {"metadata": {"name": "robot"}})
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role(ns, role("cm-reader", [{"apiGroups": [""], "resources": ["configmaps"],
                                                        "verbs": ["list"]}]))
    rbac.create_namespaced_role_binding(ns, binding("robot-cm", "Role", "cm-reader", [
        {"kind": "ServiceAccount", "name": "robot", "namespace": ns}]))
    answer = core.create_namespaced_service_account_token("robot", ns, {"spec": {"expirationSeconds": 3600}})
    token = answer.status.token
    assert answer.status.expiration_timestamp is not None
    robot = client.CoreV1Api(client_as(cluster, token, tmp_path))
    assert robot.list_namespaced_config_map(ns).items == []
    status = forbidden(lambda: robot.list_namespaced_secret(ns))
    assert f'User "system:serviceaccount:{ns}:robot" cannot list resource "secrets"' in status["message"]
    with pytest.raises(client.ApiException) as info:  # too short a token
        core.create_namespaced_service_account_token("robot", ns, {"spec": {"expirationSeconds": 60}})
    assert info.value.status == 422 and "600 seconds" in info.value.body
    with pytest.raises(client.ApiException) as info:  # no such account
        core.create_namespaced_service_account_token("ghost", ns, {"spec": {}})
    assert info.value.status == 404
    core.delete_namespaced_service_account("robot", ns)
    with pytest.raises(client.ApiException) as info:
        robot.list_namespaced_config_map(ns)
    assert info.value.status == 401


def test_granting_what_one_does_not_hold_is_refused_and_bind_or_holding_it_allows_it(admin, as_user, ns):
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role(ns, role("rbac-manager", [
        {"apiGroups": [RBAC], "resources": ["roles", "rolebindings"], "verbs": ["create", "get", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]))
    rbac.create_namespaced_role_binding(ns, binding("alice-rbac", "Role", "rbac-manager", [user("alice")]))
    alice = client.RbacAuthorizationV1Api(as_user("alice"))
    # a role with only what alice holds: allowed; one with secrets: refused with the apiserver's message
    alice.create_namespaced_role(ns, role("cm-get", [{"apiGroups": [""], "resources": ["configmaps"],
                                                      "verbs": ["get"]}]))
    status = forbidden(lambda: alice.create_namespaced_role(ns, role("secrets", [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}])))
    assert status["message"] == (
        'roles.rbac.authorization.k8s.io "secrets" is forbidden: user "alice" (groups=["devs" '
        '"system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}\n'
        '{APIGroups:[""], Resources:["secrets"], Verbs:["list"]}')
    # a patch that would widen a role she may patch: refused too
    forbidden(lambda: alice.patch_namespaced_role("cm-get", ns, {"rules": [
        {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get"]}]}))
    # binding a role she holds: allowed; binding cluster-admin: refused, until she may `bind` it
    alice.create_namespaced_role_binding(ns, binding("bob-cm", "Role", "cm-get", [user("bob")]))
    status = forbidden(lambda: alice.create_namespaced_role_binding(ns, binding(
        "bob-root", "ClusterRole", "cluster-admin", [user("bob")])))
    assert "is attempting to grant RBAC permissions not currently held" in status["message"]
    rbac.create_namespaced_role(ns, role("binder", [{"apiGroups": [RBAC], "resources": ["clusterroles"],
                                                     "verbs": ["bind"], "resourceNames": ["view"]}]))
    rbac.create_namespaced_role_binding(ns, binding("alice-binder", "Role", "binder", [user("alice")]))
    alice.create_namespaced_role_binding(ns, binding("bob-view", "ClusterRole", "view", [user("bob")]))
    assert client.CoreV1Api(as_user("bob")).list_namespaced_pod(ns).items == []


def test_kubectl_auth_can_i_answers_for_a_bound_and_an_unbound_identity(admin, kubectl_as, ns):
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role(ns, role("deployer", [{"apiGroups": ["apps"], "resources": ["deployments"],
                                                       "verbs": ["get", "list", "create"]}]))
    rbac.create_namespaced_role_binding(ns, binding("alice-deploy", "Role", "deployer", [user("alice")]))
    assert kubectl_as("alice", "auth", "can-i", "create", "deployments", "-n", ns).stdout.strip() == "yes"
    assert kubectl_as("alice", "auth", "can-i", "delete", "deployments", "-n", ns).stdout.strip() == "no"
    assert kubectl_as("carol", "auth", "can-i", "create", "deployments", "-n", ns).stdout.strip() == "no"
    assert kubectl_as("alice", "auth", "can-i", "create", "deployments", "-n", "default").stdout.strip() == "no"
    listed = kubectl_as("alice", "auth", "can-i", "--list", "-n", ns).stdout
    assert "deployments.apps" in listed and "selfsubjectaccessreviews.authorization.k8s.io" in listed
    whoami = kubectl_as("bob", "auth", "whoami", "-o", "json")
    if whoami.returncode == 0:  # kubectl asks the authentication.k8s.io/v1 SelfSubjectReview
        assert '"username": "bob"' in whoami.stdout and '"oncall"' in whoami.stdout
    refused = kubectl_as("carol", "get", "deployments", "-n", ns)
    assert refused.returncode == 1
    assert (f'deployments.apps is forbidden: User "carol" cannot list resource "deployments" in API group "apps" '
            f'in the namespace "{ns}"') in refused.stderr


def test_subject_access_review_asks_for_another_user(admin, ns):
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role(ns, role("lister", [{"apiGroups": [""], "resources": ["services"],
                                                     "verbs": ["list"]}]))
    rbac.create_namespaced_role_binding(ns, binding("ops-list", "Role", "lister", [group("ops")]))
    authz = client.AuthorizationV1Api(admin)

    def review(name: str, groups: list[str], verb: str) -> bool:
        body = {"spec": {"user": name, "groups": groups, "resourceAttributes": {
            "namespace": ns, "verb": verb, "resource": "services"}}}
        return authz.create_subject_access_review(body).status.allowed

    assert review("someone", ["ops"], "list") is True
    assert review("someone", ["devs"], "list") is False
    assert review("someone", ["ops"], "delete") is False
    answer = authz.create_subject_access_review({"spec": {"user": "x", "groups": ["ops"], "resourceAttributes": {
        "namespace": ns, "verb": "list", "resource": "services"}}})
    assert answer.status.reason == (f'RBAC: allowed by RoleBinding "ops-list" of Role "lister" to "x" '
                                    f'in namespace "{ns}"')
    with pytest.raises(client.ApiException) as info:
        authz.create_subject_access_review({"spec": {"resourceAttributes": {"verb": "list", "resource": "pods"}}})
    assert info.value.status == 422


def test_the_admin_token_is_a_cluster_admin_and_the_default_roles_exist(admin):
    rbac = client.RbacAuthorizationV1Api(admin)
    names = {r.metadata.name for r in rbac.list_cluster_role().items}
    assert {"cluster-admin", "admin", "edit", "view", "system:discovery", "system:basic-user"} <= names
    review = client.AuthorizationV1Api(admin).create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}})
    assert review.status.allowed is True


def test_blocking_an_owners_deletion_needs_update_on_its_finalizers(admin, as_user, ns):
    owner = client.CustomObjectsApi(admin).create_namespaced_custom_object("example.com", "v1", ns, "widgets", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "owner"}, "spec": {"size": 1}})
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role(ns, role("cm-writer", [{"apiGroups": [""], "resources": ["configmaps"],
                                                        "verbs": ["create"]}]))
    rbac.create_namespaced_role_binding(ns, binding("alice-cm", "Role", "cm-writer", [user("alice")]))
    core = client.CoreV1Api(as_user("alice"))

    def child(name: str, block: bool) -> dict:
        ref = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "owner",
               "uid": owner["metadata"]["uid"], "blockOwnerDeletion": block}
        return {"metadata": {"name": name, "ownerReferences": [ref]}}

    core.create_namespaced_config_map(ns, child("loose", False))
    status = forbidden(lambda: core.create_namespaced_config_map(ns, child("blocking", True)))
    assert status["message"].startswith(
        'configmaps "blocking" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a '
        'resource you can\'t set finalizers on: User "alice" cannot update resource "widgets/finalizers" in API '
        f'group "example.com" in the namespace "{ns}"')
    rbac.create_namespaced_role(ns, role("widget-finalizers", [{"apiGroups": ["example.com"],
                                                                "resources": ["widgets/finalizers"],
                                                                "verbs": ["update"]}]))
    rbac.create_namespaced_role_binding(ns, binding("alice-fin", "Role", "widget-finalizers", [user("alice")]))
    assert core.create_namespaced_config_map(ns, child("blocking", True)).metadata.name == "blocking"


def test_evicting_a_pod_needs_create_on_pods_eviction_which_edit_grants_and_view_does_not(admin, as_user, ns):
    core = client.CoreV1Api(admin)
    core.create_namespaced_pod(ns, {"metadata": {"name": "e"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role_binding(ns, binding("devs-view", "ClusterRole", "view", [group("devs")]))
    rbac.create_namespaced_role_binding(ns, binding("ops-edit", "ClusterRole", "edit", [group("ops")]))
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name="e", namespace=ns))
    status = forbidden(lambda: client.CoreV1Api(as_user("alice")).create_namespaced_pod_eviction("e", ns, body))
    assert status["message"] == (f'pods "e" is forbidden: User "alice" cannot create resource "pods/eviction" in '
                                 f'API group "" in the namespace "{ns}"')
    client.CoreV1Api(as_user("bob")).create_namespaced_pod_eviction("e", ns, body)
    assert not core.list_namespaced_pod(ns, field_selector="metadata.name=e").items or \
        core.read_namespaced_pod("e", ns).metadata.deletion_timestamp
