"""RBAC authorization as kube-apiserver's RBAC authorizer answers it, over the Roles, ClusterRoles, RoleBindings
and ClusterRoleBindings kubesim stores (`k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac`):

- a request is allowed when a rule of a role bound to the user (by name, by one of its groups, or as its
  ServiceAccount) allows it: ClusterRoleBindings everywhere, RoleBindings in their namespace only;
- a rule allows a request when its verbs, apiGroups and resources (`*`, `memcacheds/status`, `*/status`) match,
  and its resourceNames (when any) name the object; non-resource requests match `nonResourceURLs` (`*`, an
  exact path, or a prefix ending in `*`);
- a ClusterRole with an `aggregationRule` has the rules of every ClusterRole its selectors match (what the
  aggregation controller writes into it in a real cluster);
- `system:masters` may do everything;
- escalation prevention: creating or updating a (Cluster)Role needs every permission in it (or `escalate` on
  it), creating or updating a binding needs the role's permissions (or `bind` on it), with kube-apiserver's
  "attempting to grant RBAC permissions not currently held" refusal.

The default roles (`bootstrap_policy`) are the ones a new cluster has that clients rely on: `cluster-admin`,
`system:discovery`, `system:basic-user`, `system:public-info-viewer`, and a subset of `admin`/`edit`/`view`
aggregated from `system:aggregate-to-*` roles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.auth.identity import MASTERS, UserInfo
from kubesim.auth.request_info import Attributes
from kubesim.selectors import selector_from_label_selector

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

RBAC_GROUP = "rbac.authorization.k8s.io"
Rule = dict[str, Any]


def _has(values: Iterable[str] | None, wanted: str) -> bool:
    values = list(values or ())
    return "*" in values or wanted in values


def resource_matches(rule_resources: Iterable[str] | None, resource: str, subresource: str) -> bool:
    """kube-apiserver's ResourceMatches: `*`, `resource/subresource` exactly, or `*/subresource`."""
    combined = f"{resource}/{subresource}" if subresource else resource
    for rr in rule_resources or ():
        if rr in ("*", combined):
            return True
        if subresource and rr == f"*/{subresource}":
            return True
    return False


def non_resource_url_matches(urls: Iterable[str] | None, path: str) -> bool:
    for url in urls or ():
        if url in ("*", path) or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rule_allows(rule: Rule, attrs: Attributes) -> bool:
    """Whether `rule` allows the request `attrs`."""
    if not _has(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        return non_resource_url_matches(rule.get("nonResourceURLs"), attrs.path)
    if not _has(rule.get("apiGroups"), attrs.api_group):
        return False
    if not resource_matches(rule.get("resources"), attrs.resource, attrs.subresource):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def subject_matches(subject: dict[str, Any], user: UserInfo, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return user.name == f"system:serviceaccount:{namespace}:{name}"
    return False


@dataclass(frozen=True)
class Grant:
    """Rules one binding gives a user, and where they come from (for the allow reason)."""

    binding_kind: str
    binding: str
    namespace: str
    role_kind: str
    role: str
    rules: tuple[Rule, ...]

    def describe(self, user: UserInfo) -> str:
        where = f' in namespace "{self.namespace}"' if self.namespace else ""
        return (f'RBAC: allowed by {self.binding_kind} "{self.binding}" of {self.role_kind} "{self.role}" to '
                f'"{user.name}"{where}')


class RBACAuthorizer:
    """Answers authorization questions from the RBAC objects in `cluster`'s store, as they are now."""

    def __init__(self, cluster: Cluster, check: Callable[[Attributes], bool] | None = None) -> None:
        self.cluster = cluster
        #: how the checks made while serving a request (`bind`, `escalate`, an owner's finalizers) are decided:
        #: the simulator's recording authorize; plain `authorize` when none is given
        self.check = check or (lambda attrs: self.authorize(attrs)[0])

    def _items(self, plural: str, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        rt = self.cluster.resource(RBAC_GROUP, plural)
        yield from self.cluster.store.items(rt.key, namespace)

    def cluster_role(self, name: str) -> dict[str, Any] | None:
        return self.cluster.store.get(self.cluster.resource(RBAC_GROUP, "clusterroles").key, "", name)

    def cluster_role_rules(self, role: dict[str, Any], _seen: frozenset[str] = frozenset()) -> list[Rule]:
        """A ClusterRole's rules, with those of the ClusterRoles its aggregationRule selects."""
        rules = list(role.get("rules") or [])
        aggregation = role.get("aggregationRule") or {}
        selectors = [selector_from_label_selector(s) for s in aggregation.get("clusterRoleSelectors") or []]
        if not selectors:
            return rules
        name = role["metadata"]["name"]
        seen = _seen | {name}
        for other in self._items("clusterroles"):
            other_name = other["metadata"]["name"]
            if other_name in seen or not any(match(other) for match in selectors):
                continue
            rules.extend(self.cluster_role_rules(other, seen))
        return rules

    def role_ref_rules(self, role_ref: dict[str, Any], namespace: str) -> list[Rule] | None:
        """The rules a binding's roleRef names (None: that role does not exist)."""
        kind, name = role_ref.get("kind"), role_ref.get("name") or ""
        if kind == "ClusterRole":
            role = self.cluster_role(name)
            return None if role is None else self.cluster_role_rules(role)
        if kind == "Role" and namespace:
            role = self.cluster.store.get(self.cluster.resource(RBAC_GROUP, "roles").key, namespace, name)
            return None if role is None else list(role.get("rules") or [])
        return None

    def grants(self, user: UserInfo, namespace: str) -> Iterator[Grant]:
        """What the user's bindings give it: every ClusterRoleBinding's, then `namespace`'s RoleBindings'."""
        for binding in self._items("clusterrolebindings"):
            if any(subject_matches(s, user, "") for s in binding.get("subjects") or []):
                ref = binding.get("roleRef") or {}
                rules = self.role_ref_rules(ref, "") if ref.get("kind") == "ClusterRole" else None
                if rules:
                    yield Grant("ClusterRoleBinding", binding["metadata"]["name"], "", "ClusterRole",
                                ref.get("name", ""), tuple(rules))
        if not namespace:
            return
        for binding in self._items("rolebindings", namespace):
            if any(subject_matches(s, user, namespace) for s in binding.get("subjects") or []):
                ref = binding.get("roleRef") or {}
                rules = self.role_ref_rules(ref, namespace)
                if rules:
                    yield Grant("RoleBinding", binding["metadata"]["name"], namespace, ref.get("kind", ""),
                                ref.get("name", ""), tuple(rules))

    def rules_for(self, user: UserInfo, namespace: str) -> list[Rule]:
        """Every rule that applies to the user in `namespace` ("" : cluster-wide rules only)."""
        if MASTERS in user.groups:
            return [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                    {"verbs": ["*"], "nonResourceURLs": ["*"]}]
        return [rule for grant in self.grants(user, namespace) for rule in grant.rules]

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason) for one request."""
        if MASTERS in attrs.user.groups:
            return True, f'RBAC: allowed: "{attrs.user.name}" is in group "{MASTERS}"'
        namespace = attrs.namespace if attrs.resource_request else ""
        for grant in self.grants(attrs.user, namespace):
            if any(rule_allows(rule, attrs) for rule in grant.rules):
                return True, grant.describe(attrs.user)
        return False, ""

    # -- escalation prevention ------------------------------------------------------------------------------

    def check_role_write(self, user: UserInfo, plural: str, namespace: str, obj: dict[str, Any]) -> None:
        """Creating or updating a Role (`roles`) or ClusterRole (`clusterroles`): refused (403) unless the user
        holds every permission it grants or may `escalate` it."""
        name = (obj.get("metadata") or {}).get("name") or ""
        if self._may(user, "escalate", plural, namespace, name):
            return
        rules = self.cluster_role_rules(obj) if plural == "clusterroles" else list(obj.get("rules") or [])
        self._refuse_uncovered(user, plural, namespace, name, rules)

    def check_binding_write(self, user: UserInfo, plural: str, namespace: str, obj: dict[str, Any]) -> None:
        """Creating or updating a RoleBinding or ClusterRoleBinding: refused (403) unless the user may `bind`
        the role it refers to or holds every permission of that role."""
        name = (obj.get("metadata") or {}).get("name") or ""
        ref = obj.get("roleRef") or {}
        ref_plural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
        if self._may(user, "bind", ref_plural, namespace, ref.get("name") or ""):
            return
        rules = self.role_ref_rules(ref, namespace)
        if rules is None:
            ref_name = ref.get("name") or ""
            raise errors.forbidden(f'{plural}.{RBAC_GROUP} "{name}" is forbidden: {ref_plural}.{RBAC_GROUP} '
                                   f'"{ref_name}" not found', plural, RBAC_GROUP, name)
        self._refuse_uncovered(user, plural, namespace, name, rules)

    def _may(self, user: UserInfo, verb: str, plural: str, namespace: str, name: str) -> bool:
        attrs = Attributes(user, verb, True, api_group=RBAC_GROUP, api_version="v1", namespace=namespace,
                           resource=plural, name=name)
        return self.check(attrs)

    def check_owner_references(self, user: UserInfo, qualified: str, namespace: str, obj: dict[str, Any],
                               old: dict[str, Any] | None, plural_of: Callable[[str, str], str | None]) -> None:
        """The OwnerReferencesPermissionEnforcement admission plugin: setting `blockOwnerDeletion` on an owner
        reference (one the old object did not block with) needs `update` on that owner's `finalizers`
        subresource; 403 with the plugin's message otherwise. `plural_of(apiVersion, kind)` names the owner's
        resource (None: a kind the server does not serve, which the plugin refuses too)."""
        before = {(r.get("uid"), bool(r.get("blockOwnerDeletion")))
                  for r in ((old or {}).get("metadata") or {}).get("ownerReferences") or []}
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            if not ref.get("blockOwnerDeletion") or (ref.get("uid"), True) in before:
                continue
            api_version, kind, owner = ref.get("apiVersion") or "", ref.get("kind") or "", ref.get("name") or ""
            group = api_version.rpartition("/")[0] if "/" in api_version else ""
            plural = plural_of(api_version, kind)
            attrs = Attributes(user, "update", True, api_group=group, api_version=api_version.rpartition("/")[2],
                               namespace=namespace, resource=plural or "", subresource="finalizers", name=owner)
            if plural is None or not self.check(attrs):
                name = (obj.get("metadata") or {}).get("name") or ""
                where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
                raise errors.forbidden(
                    f'{qualified} "{name}" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers '
                    f"to a resource you can't set finalizers on: User \"{user.name}\" cannot update resource "
                    f'"{plural or kind.lower()}/finalizers" in API group "{group}" {where}, {ref}',
                    qualified.partition(".")[0], group, name)

    def _refuse_uncovered(self, user: UserInfo, plural: str, namespace: str, name: str, rules: list[Rule]) -> None:
        uncovered = uncovered_rules(self.rules_for(user, namespace), rules)
        if not uncovered:
            return
        groups = " ".join(f'"{g}"' for g in user.groups)
        lines = "\n".join(compact(rule) for rule in uncovered)
        raise errors.forbidden(f'{plural}.{RBAC_GROUP} "{name}" is forbidden: user "{user.name}" (groups=[{groups}]) '
                               f"is attempting to grant RBAC permissions not currently held:\n{lines}",
                               plural, RBAC_GROUP, name)


def _atomic(rules: Iterable[Rule]) -> Iterator[Rule]:
    """Each rule broken down to one verb on one group/resource/name (or one non-resource URL)."""
    for rule in rules:
        verbs = rule.get("verbs") or []
        for url in rule.get("nonResourceURLs") or []:
            for verb in verbs:
                yield {"verbs": [verb], "nonResourceURLs": [url]}
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                for verb in verbs:
                    names = rule.get("resourceNames") or [None]
                    for name in names:
                        atom: Rule = {"verbs": [verb], "apiGroups": [group], "resources": [resource]}
                        if name is not None:
                            atom["resourceNames"] = [name]
                        yield atom


def _covers(owner: Rule, atom: Rule) -> bool:
    verb = atom["verbs"][0]
    if not _has(owner.get("verbs"), verb):
        return False
    if "nonResourceURLs" in atom:
        url = atom["nonResourceURLs"][0]
        return any(o == "*" or o == url or (o.endswith("*") and url.startswith(o[:-1]))
                   for o in owner.get("nonResourceURLs") or [])
    if not _has(owner.get("apiGroups"), atom["apiGroups"][0]):
        return False
    resource = atom["resources"][0]
    base, _, sub = resource.partition("/")
    owned = owner.get("resources") or []
    if not ("*" in owned or resource in owned or (sub and f"*/{sub}" in owned)):
        return False
    names = owner.get("resourceNames") or []
    return not names or (atom.get("resourceNames") or [None])[0] in names


def uncovered_rules(owner_rules: list[Rule], servant_rules: list[Rule]) -> list[Rule]:
    """The atomic parts of `servant_rules` that no rule of `owner_rules` covers (kube-apiserver's Covers)."""
    return [atom for atom in _atomic(servant_rules) if not any(_covers(o, atom) for o in owner_rules)]


def compact(rule: Rule) -> str:
    """A rule as kube-apiserver prints it in an escalation refusal: `{APIGroups:[""], Resources:["pods"],
    Verbs:["get"]}`."""

    def quoted(values: Iterable[str]) -> str:
        return "[" + " ".join(f'"{v}"' for v in values) + "]"

    parts = []
    if rule.get("nonResourceURLs"):
        parts.append(f"NonResourceURLs:{quoted(rule['nonResourceURLs'])}")
    else:
        parts.append(f"APIGroups:{quoted(rule.get('apiGroups') or [])}")
        parts.append(f"Resources:{quoted(rule.get('resources') or [])}")
        if rule.get("resourceNames"):
            parts.append(f"ResourceNames:{quoted(rule['resourceNames'])}")
    parts.append(f"Verbs:{quoted(rule.get('verbs') or [])}")
    return "{" + ", ".join(parts) + "}"


# -- the default policy of a new cluster ---------------------------------------------------------------------

_READ = ["get", "list", "watch"]
_WRITE = ["create", "delete", "deletecollection", "patch", "update"]
_CORE_WORKLOADS = ["pods", "pods/log", "services", "endpoints", "configmaps", "persistentvolumeclaims",
                   "replicationcontrollers", "serviceaccounts", "events"]
_APPS = ["deployments", "deployments/scale", "replicasets", "replicasets/scale", "statefulsets",
         "statefulsets/scale", "daemonsets"]
_BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}


def _cluster_role(name: str, rules: list[Rule], *, labels: dict[str, str] | None = None,
                  aggregate_to: str | None = None) -> dict[str, Any]:
    role: dict[str, Any] = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole",
                            "metadata": {"name": name, "labels": {**_BOOTSTRAP_LABELS, **(labels or {})},
                                         "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
                            "rules": rules}
    if aggregate_to:
        role["aggregationRule"] = {"clusterRoleSelectors": [
            {"matchLabels": {f"rbac.authorization.k8s.io/aggregate-to-{aggregate_to}": "true"}}]}
        role["rules"] = []
    return role


def _binding(name: str, role: str, groups: list[str]) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": dict(_BOOTSTRAP_LABELS),
                         "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups]}


def bootstrap_policy() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(ClusterRoles, ClusterRoleBindings) a new cluster starts with."""
    discovery_urls = ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/readyz", "/openapi",
                      "/openapi/*", "/version", "/version/"]
    roles = [
        _cluster_role("cluster-admin", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                                        {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        _cluster_role("system:discovery", [{"nonResourceURLs": discovery_urls, "verbs": ["get"]}]),
        _cluster_role("system:public-info-viewer", [{"nonResourceURLs": [
            "/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        _cluster_role("system:basic-user", [
            {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews",
                                                                   "selfsubjectrulesreviews"], "verbs": ["create"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]),
        _cluster_role("admin", [], aggregate_to="admin"),
        _cluster_role("edit", [], labels={"rbac.authorization.k8s.io/aggregate-to-admin": "true"},
                      aggregate_to="edit"),
        _cluster_role("view", [], labels={"rbac.authorization.k8s.io/aggregate-to-edit": "true"},
                      aggregate_to="view"),
        _cluster_role("system:aggregate-to-view", [
            {"apiGroups": [""], "resources": [*_CORE_WORKLOADS, "namespaces", "resourcequotas"], "verbs": _READ},
            {"apiGroups": ["apps"], "resources": [*_APPS, "controllerrevisions"], "verbs": _READ},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": _READ},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": _READ}],
            labels={"rbac.authorization.k8s.io/aggregate-to-view": "true"}),
        _cluster_role("system:aggregate-to-edit", [
            {"apiGroups": [""], "resources": [*_CORE_WORKLOADS, "secrets"], "verbs": _WRITE},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": _READ},
            {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
            {"apiGroups": ["apps"], "resources": _APPS, "verbs": _WRITE},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": _WRITE},
            {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": _WRITE}],
            labels={"rbac.authorization.k8s.io/aggregate-to-edit": "true"}),
        _cluster_role("system:aggregate-to-admin", [
            {"apiGroups": [RBAC_GROUP], "resources": ["roles", "rolebindings"], "verbs": [*_READ, *_WRITE]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]}],
            labels={"rbac.authorization.k8s.io/aggregate-to-admin": "true"}),
    ]
    bindings = [
        _binding("cluster-admin", "cluster-admin", [MASTERS]),
        _binding("system:discovery", "system:discovery", ["system:authenticated"]),
        _binding("system:basic-user", "system:basic-user", ["system:authenticated"]),
        _binding("system:public-info-viewer", "system:public-info-viewer",
                 ["system:authenticated", "system:unauthenticated"]),
    ]
    return roles, bindings
