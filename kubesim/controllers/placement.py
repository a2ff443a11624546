"""Where a Pod may run: kube-scheduler's filters and a simple score, and its FitError wording when none fits.

Filters, in the scheduler's order, the first that rejects a node giving that node's reason:

- NodeUnschedulable: ``spec.unschedulable`` (cordoned) unless tolerated -> "node(s) were unschedulable";
- TaintToleration: ``spec.taints`` with effect NoSchedule/NoExecute, and the taint a node that is not Ready
  carries (``node.kubernetes.io/not-ready``, or ``.../unreachable`` when its Ready condition is Unknown or
  missing), unless tolerated -> "node(s) had untolerated taint {key: value}";
- NodeAffinity: ``nodeSelector`` and required node affinity -> "node(s) didn't match Pod's node affinity/selector";
- PodTopologySpread, for ``whenUnsatisfiable: DoNotSchedule`` constraints: a node without the topology key ->
  "node(s) didn't match pod topology spread constraints (missing required label)"; a domain whose matching Pods
  plus this one exceed the global minimum (0 when fewer than ``minDomains`` domains exist) by more than
  ``maxSkew`` -> "node(s) didn't match pod topology spread constraints".

Counting follows the plugin: domains come from the nodes that match the Pod's node affinity (nodeAffinityPolicy
Honor, the default) and carry every constraint's key, cordoned or not; Pods count when bound there, in the Pod's
namespace, not terminating, and matched by the constraint's selector (with ``matchLabelKeys`` added).

When no node fits, :func:`fit_error` words it as kube-scheduler's FitError followed by the preemption
PostFilter's own: nodes rejected by an unresolvable filter are "Preemption is not helpful for scheduling"; the
ones rejected by topology spread (resolvable by evicting Pods) are "No preemption victims found for incoming pod",
since kubesim's Pods all have the same priority.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubesim.nodes import is_node_ready
from kubesim.selectors import selector_from_label_selector

UNSCHEDULABLE = "node(s) were unschedulable"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
SPREAD = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL = SPREAD + " (missing required label)"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NO_NODES = "no nodes available to schedule pods"
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


@dataclass
class Placement:
    """The outcome of one scheduling attempt: a node name, or the FitError message."""

    node: str | None
    message: str = ""


def tolerates(tolerations: Iterable[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """Whether one of the Pod's tolerations tolerates the taint (v1helper.TolerationsTolerateTaint)."""
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key") and op == "Exists":
            return True
        if t.get("key") != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _node_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    taints = [t for t in (node.get("spec") or {}).get("taints") or []
              if t.get("effect") in ("NoSchedule", "NoExecute")]
    if not is_node_ready(node):
        ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"),
                     None)
        key = "node.kubernetes.io/not-ready" if ready and ready.get("status") == "False" \
            else "node.kubernetes.io/unreachable"
        if not any(t.get("key") == key for t in taints):
            taints.append({"key": key, "effect": "NoSchedule"})
    return taints


def _match_node_expr(labels: dict[str, str], expr: dict[str, Any]) -> bool:
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def matches_affinity(pod: dict[str, Any], node: dict[str, Any]) -> bool:
    """nodeSelector and requiredDuringSchedulingIgnoredDuringExecution node affinity (terms ORed)."""
    spec = pod.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    name = node["metadata"]["name"]
    for term in terms:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not exprs and not fields:
            continue
        if all(_match_node_expr(labels, e) for e in exprs) and \
                all(_match_node_expr({"metadata.name": name}, f) for f in fields):
            return True
    return False


class Spread:
    """The Pod's topology spread constraints and, per constraint, the matching Pods counted per domain."""

    def __init__(self, pod: dict[str, Any], nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
                 hard: bool) -> None:
        spec = pod.get("spec") or {}
        labels = pod["metadata"].get("labels") or {}
        want = "DoNotSchedule" if hard else "ScheduleAnyway"
        self.constraints = [c for c in spec.get("topologySpreadConstraints") or []
                            if (c.get("whenUnsatisfiable") or "DoNotSchedule") == want]
        self.selectors = [self._selector(c, labels) for c in self.constraints]
        self.self_match = [bool(s and s(pod)) for s in self.selectors]
        keys = [c.get("topologyKey", "") for c in self.constraints]
        self.counts: list[Counter[str]] = [Counter() for _ in self.constraints]
        if not self.constraints:
            return
        by_node: dict[str, list[dict[str, Any]]] = {}
        ns = pod["metadata"].get("namespace")
        for p in pods:
            node_name = (p.get("spec") or {}).get("nodeName")
            if node_name and not p["metadata"].get("deletionTimestamp") and p["metadata"].get("namespace") == ns:
                by_node.setdefault(node_name, []).append(p)
        for node in nodes:
            node_labels = node["metadata"].get("labels") or {}
            if not all(k in node_labels for k in keys):
                continue
            for i, c in enumerate(self.constraints):
                if not self._included(c, pod, node):
                    continue
                value = node_labels[keys[i]]
                sel = self.selectors[i]
                self.counts[i][value] += sum(1 for p in by_node.get(node["metadata"]["name"], []) if sel and sel(p))

    @staticmethod
    def _selector(c: dict[str, Any], labels: dict[str, str]) -> Any:
        sel = c.get("labelSelector")
        if sel is None:
            return None  # a nil selector matches nothing
        sel = {"matchLabels": dict(sel.get("matchLabels") or {}),
               "matchExpressions": list(sel.get("matchExpressions") or [])}
        for key in c.get("matchLabelKeys") or []:
            if key in labels:
                sel["matchLabels"][key] = labels[key]
        return selector_from_label_selector(sel)

    @staticmethod
    def _included(c: dict[str, Any], pod: dict[str, Any], node: dict[str, Any]) -> bool:
        if c.get("nodeAffinityPolicy", "Honor") == "Honor" and not matches_affinity(pod, node):
            return False
        if c.get("nodeTaintsPolicy", "Ignore") == "Honor":
            tolerations = (pod.get("spec") or {}).get("tolerations") or []
            return all(tolerates(tolerations, t) for t in _node_taints(node))
        return True

    def _min(self, i: int) -> int:
        counts = self.counts[i]
        min_domains = self.constraints[i].get("minDomains")
        if min_domains is not None and len(counts) < int(min_domains):
            return 0
        return min(counts.values()) if counts else 0

    def reject(self, node: dict[str, Any]) -> str | None:
        """The reason this node breaks a constraint, or None."""
        labels = node["metadata"].get("labels") or {}
        for i, c in enumerate(self.constraints):
            key = c.get("topologyKey", "")
            if key not in labels:
                return SPREAD_LABEL
            skew = self.counts[i][labels[key]] + int(self.self_match[i]) - self._min(i)
            if skew > int(c.get("maxSkew", 1)):
                return SPREAD
        return None

    def load(self, node: dict[str, Any]) -> int:
        """Matching Pods already in this node's domains (lower is a better spread)."""
        labels = node["metadata"].get("labels") or {}
        return sum(self.counts[i][labels.get(c.get("topologyKey", ""), "")] for i, c in enumerate(self.constraints))


def filter_node(pod: dict[str, Any], node: dict[str, Any], spread: Spread) -> str | None:
    """Why the node cannot take the Pod (the first filter that rejects it), or None when it fits."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    if (node.get("spec") or {}).get("unschedulable") and not tolerates(tolerations, UNSCHEDULABLE_TAINT):
        return UNSCHEDULABLE
    for taint in _node_taints(node):
        if not tolerates(tolerations, taint):
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
    if not matches_affinity(pod, node):
        return AFFINITY
    return spread.reject(node)


def _histogram(reasons: Iterable[str]) -> str:
    return ", ".join(sorted(f"{n} {reason}" for reason, n in Counter(reasons).items()))


def fit_error(pod: dict[str, Any], rejected: dict[str, str]) -> str:
    """kube-scheduler's message for a Pod no node fits: the filters' histogram, then preemption's."""
    total = len(rejected)
    message = f"0/{total} nodes are available: {_histogram(rejected.values())}."
    if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
        return message + " preemption: not eligible due to preemptionPolicy=Never."
    victims = (NO_VICTIMS if reason == SPREAD else NOT_HELPFUL for reason in rejected.values())
    return message + f" preemption: 0/{total} nodes are available: {_histogram(victims)}."


def place(pod: dict[str, Any], nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Placement:
    """Pick a node for the Pod: the feasible one with the fewest matching Pods in its soft-spread domains, then
    the fewest Pods of the same owner in its zone and on it, then the fewest Pods, then by name."""
    if not nodes:
        return Placement(None, NO_NODES)
    hard = Spread(pod, nodes, pods, hard=True)
    rejected: dict[str, str] = {}
    feasible = []
    for node in nodes:
        reason = filter_node(pod, node, hard)
        if reason is None:
            feasible.append(node)
        else:
            rejected[node["metadata"]["name"]] = reason
    if not feasible:
        return Placement(None, fit_error(pod, rejected))
    soft = Spread(pod, nodes, pods, hard=False)
    owner = _owner(pod)
    per_node: Counter[str] = Counter()
    same_owner_node: Counter[str] = Counter()
    for p in pods:
        node_name = (p.get("spec") or {}).get("nodeName")
        if node_name and not p["metadata"].get("deletionTimestamp"):
            per_node[node_name] += 1
            if owner and _owner(p) == owner:
                same_owner_node[node_name] += 1
    zone_of = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get("topology.kubernetes.io/zone", "")
               for n in nodes}
    same_owner_zone: Counter[str] = Counter()
    for name, n in same_owner_node.items():
        same_owner_zone[zone_of.get(name, "")] += n

    def score(node: dict[str, Any]) -> tuple[int, int, int, int, str]:
        name = node["metadata"]["name"]
        return (soft.load(node), same_owner_zone[zone_of[name]], same_owner_node[name], per_node[name], name)

    return Placement(min(feasible, key=score)["metadata"]["name"])


def _owner(pod: dict[str, Any]) -> str | None:
    ref = next((r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")), None)
    return ref.get("uid") if ref else None
