"""The Eviction subresource (``POST /api/v1/namespaces/{ns}/pods/{name}/eviction``), as kube-apiserver serves it.

A Pod that is Pending, finished or already terminating is deleted without looking at budgets. Otherwise the
PodDisruptionBudgets of its namespace whose selector matches it decide: none -> delete; more than one -> 500
("This pod has more than one PodDisruptionBudget, ..."); one -> if the Pod is not Ready and the budget has its
desired healthy Pods, delete it (a resourceVersion precondition guards against it turning Ready meanwhile); else
the budget must allow a disruption: a status not yet computed for its generation is 429 "... is still being
processed by the server." (Retry-After 10), ``disruptionsAllowed`` 0 is 429 "Cannot evict pod as it would violate
the pod's disruption budget." with a ``DisruptionBudget`` cause "The disruption budget <name> needs <desired>
healthy pods and has <current> currently"; otherwise ``disruptionsAllowed`` goes down by one (the
DisruptionAllowed condition turns False at 0), the Pod is recorded in ``status.disruptedPods`` and deleted with the
Eviction's deleteOptions. Success is a ``Status`` with ``status: Success`` and code 201.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.cluster.options import WriteOptions
from kubesim.controllers.workloads import is_pod_ready
from kubesim.meta import clone, now
from kubesim.selectors import selector_from_label_selector

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

PDB_KEY = ("policy", "poddisruptionbudgets")
#: kube-apiserver refuses evictions once this many are recorded and not yet seen by the disruption controller
MAX_DISRUPTED_PODS = 2000
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


def success(code: int = 201) -> dict[str, Any]:
    """The Status an accepted eviction answers with."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def _too_many(cause: str, retry_after: int = 0) -> errors.ApiError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    headers = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return errors.ApiError(429, "TooManyRequests", VIOLATION, details, headers)


def _forbidden(pdb: str, why: str) -> errors.ApiError:
    return errors.ApiError(403, "Forbidden", f'poddisruptionbudget.policy "{pdb}" is forbidden: {why}',
                           {"name": pdb, "group": "policy", "kind": "poddisruptionbudget"})


def check_body(name: str, body: Any) -> dict[str, Any]:
    """The Eviction's deleteOptions, after checking the body is an Eviction naming this Pod (400 otherwise)."""
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a policy/v1 Eviction")
    kind, version = body.get("kind"), body.get("apiVersion")
    if (kind and kind != "Eviction") or (version and version not in ("policy/v1", "policy/v1beta1")):
        raise errors.bad_request(f"not a Eviction object: {version}, Kind={kind}")
    if (body.get("metadata") or {}).get("name") != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = body.get("deleteOptions") or {}
    if not isinstance(options, dict):
        raise errors.bad_request("deleteOptions must be an object")
    return options


def _can_ignore_budget(pod: dict[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def budgets_of(cluster: Cluster, pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The PodDisruptionBudgets selecting the Pod (a missing or empty selector selects nothing)."""
    out = []
    for pdb in cluster.store.items(PDB_KEY, pod["metadata"]["namespace"]):
        sel = (pdb.get("spec") or {}).get("selector")
        if not sel or not (sel.get("matchLabels") or sel.get("matchExpressions")):
            continue
        if selector_from_label_selector(sel)(pod):
            out.append(pdb)
    return out


def evict(cluster: Cluster, namespace: str, name: str, body: Any, opts: WriteOptions) -> tuple[int, dict[str, Any]]:
    """Serve one eviction; returns (HTTP code, Status body). Refusals raise :class:`errors.ApiError`."""
    options = check_body(name, body)
    if options.get("dryRun"):
        if any(d != "All" for d in options["dryRun"]):
            raise errors.bad_request(f"Invalid dryRun value: {options['dryRun']}")
        opts = replace(opts, dry_run=True)
    rt = cluster.resource("", "pods")
    pod = cluster.get(rt, namespace, name)
    if _can_ignore_budget(pod):
        cluster.delete(rt, namespace, name, options, opts)
        return 201, success()
    pdbs = budgets_of(cluster, pod)
    if len(pdbs) > 1:
        return 500, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": MULTIPLE,
                     "code": 500}
    if pdbs:
        pdb = pdbs[0]
        status = pdb.get("status") or {}
        desired, current = int(status.get("desiredHealthy", 0)), int(status.get("currentHealthy", 0))
        if not is_pod_ready(pod) and current >= desired > 0:
            guarded = dict(options)
            guarded["preconditions"] = {**(options.get("preconditions") or {}),
                                        "resourceVersion": pod["metadata"]["resourceVersion"]}
            cluster.delete(rt, namespace, name, guarded, opts)
            return 201, success()
        _decrement(cluster, pdb, name, opts.dry_run)
    cluster.delete(rt, namespace, name, options, opts)
    return 201, success()


def _decrement(cluster: Cluster, pdb: dict[str, Any], pod_name: str, dry_run: bool) -> None:
    """kube-apiserver's checkAndDecrement: refuse, or take one disruption from the budget and record the Pod."""
    name = pdb["metadata"]["name"]
    status = pdb.get("status") or {}
    if int(status.get("observedGeneration", 0)) < int(pdb["metadata"].get("generation", 1)):
        raise _too_many(f"The disruption budget {name} is still being processed by the server.", 10)
    allowed = int(status.get("disruptionsAllowed", 0))
    if allowed < 0:
        raise _forbidden(name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise _forbidden(name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller")
    if allowed == 0:
        raise _too_many(f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods and has "
                        f"{status.get('currentHealthy', 0)} currently")
    if dry_run:
        return
    new = clone(pdb)
    nst = new["status"]
    nst["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        conds = [c for c in nst.get("conditions") or [] if c.get("type") != "DisruptionAllowed"]
        prev = next((c for c in nst.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), {})
        stamp = prev.get("lastTransitionTime") if prev.get("status") == "False" else now()
        conds.append({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods", "message": "",
                      "observedGeneration": nst.get("observedGeneration"), "lastTransitionTime": stamp})
        nst["conditions"] = conds
    nst["disruptedPods"] = {**(nst.get("disruptedPods") or {}), pod_name: now()}
    rt = cluster.resource("policy", "poddisruptionbudgets")
    cluster.replace(rt, pdb, new, subresource="status", opts=WriteOptions(field_manager="kube-apiserver"))
