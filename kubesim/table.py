"""meta.k8s.io Table rendering (what ``kubectl get`` asks for), with additionalPrinterColumns for CRDs."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import Any

from kubesim.jsonpath import evaluate
from kubesim.meta import dumps, parse_time
from kubesim.registry import ResourceType

Column = tuple[str, str, str, int]  # name, type, format, priority


def human_age(ts: str | None) -> str:
    """kubectl's HumanDuration of the time since ``ts``."""
    if not ts:
        return "<unknown>"
    try:
        secs = int((_dt.datetime.now(_dt.UTC) - parse_time(ts)).total_seconds())
    except ValueError:
        return "<invalid>"
    if secs < -1:
        return "<invalid>"
    return human_duration(secs)


def human_duration(secs: int) -> str:
    """kubectl's HumanDuration of ``secs`` seconds."""
    secs = max(secs, 0)
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        return f"{minutes}m{secs % 60}s" if secs % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    return f"{hours // (24 * 365)}y"


def _age(o: dict[str, Any]) -> str:
    return human_age(o["metadata"].get("creationTimestamp"))


def _pod_cells(o: dict[str, Any]) -> list[Any]:
    spec, status = o.get("spec") or {}, o.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    reason = status.get("reason") or status.get("phase") or "Pending"
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    for c in statuses:
        state = c.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state and state["terminated"].get("reason"):
            reason = state["terminated"]["reason"]
    if o["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return [o["metadata"]["name"], f"{ready}/{len(spec.get('containers') or [])}", reason, restarts, _age(o),
            status.get("podIP") or "<none>", spec.get("nodeName") or "<none>", "<none>", "<none>"]


def _images(o: dict[str, Any]) -> tuple[str, str]:
    cs = ((o.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
    return ",".join(c.get("name", "") for c in cs), ",".join(c.get("image", "") for c in cs)


def _selector(o: dict[str, Any]) -> str:
    from kubesim.selectors import label_selector_string

    return label_selector_string((o.get("spec") or {}).get("selector")) or "<none>"


def _deploy_cells(o: dict[str, Any]) -> list[Any]:
    s = o.get("status") or {}
    names, images = _images(o)
    return [o["metadata"]["name"], f"{s.get('readyReplicas', 0)}/{(o.get('spec') or {}).get('replicas', 0)}",
            s.get("updatedReplicas", 0), s.get("availableReplicas", 0), _age(o), names, images, _selector(o)]


def _rs_cells(o: dict[str, Any]) -> list[Any]:
    s = o.get("status") or {}
    names, images = _images(o)
    return [o["metadata"]["name"], (o.get("spec") or {}).get("replicas", 0), s.get("replicas", 0),
            s.get("readyReplicas", 0), _age(o), names, images, _selector(o)]


def _sts_cells(o: dict[str, Any]) -> list[Any]:
    s = o.get("status") or {}
    names, images = _images(o)
    return [o["metadata"]["name"], f"{s.get('readyReplicas', 0)}/{(o.get('spec') or {}).get('replicas', 0)}",
            _age(o), names, images]


def _svc_cells(o: dict[str, Any]) -> list[Any]:
    spec = o.get("spec") or {}
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []) or "<none>"
    return [o["metadata"]["name"], spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>", "<none>",
            ports, _age(o), _selector_map(spec.get("selector"))]


def _selector_map(sel: dict[str, str] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted((sel or {}).items())) or "<none>"


def _event_cells(o: dict[str, Any]) -> list[Any]:
    inv = o.get("involvedObject") or {}
    last = o.get("lastTimestamp") or o.get("eventTime") or o["metadata"].get("creationTimestamp")
    return [human_age(last), o.get("type", ""), o.get("reason", ""),
            f"{(inv.get('kind') or '').lower()}/{inv.get('name', '')}", o.get("message", "")]


def _node_cells(o: dict[str, Any]) -> list[Any]:
    conds = (o.get("status") or {}).get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), None)
    state = "Unknown" if ready is None else "Ready" if ready.get("status") == "True" else "NotReady"
    if (o.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"  # kubectl's printer: a cordoned node
    version = ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
    return [o["metadata"]["name"], state, "<none>", _age(o), version]


def _duration(start: str | None, end: str | None) -> str:
    """A Job's running time (kubectl's DURATION): start to completion, or to now while it runs."""
    if not start:
        return ""
    try:
        stop = parse_time(end) if end else _dt.datetime.now(_dt.UTC)
        return human_duration(int((stop - parse_time(start)).total_seconds()))
    except ValueError:
        return "<invalid>"


def _condition_true(o: dict[str, Any], kind: str) -> bool:
    conds = (o.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conds)


def _job_status(o: dict[str, Any]) -> str:
    for kind in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "Suspended"):
        if _condition_true(o, kind):
            return kind
    return "Suspended" if (o.get("spec") or {}).get("suspend") else "Running"


def _job_cells(o: dict[str, Any]) -> list[Any]:
    spec, s = o.get("spec") or {}, o.get("status") or {}
    done = s.get("succeeded", 0)
    if spec.get("completions") is not None:
        completions = f"{done}/{spec['completions']}"
    elif (spec.get("parallelism") or 1) > 1:
        completions = f"{done}/1 of {spec['parallelism']}"
    else:
        completions = f"{done}/1"
    names, images = _images(o)
    return [o["metadata"]["name"], _job_status(o), completions, _duration(s.get("startTime"), s.get("completionTime")),
            _age(o), names, images, _selector(o)]


def _cronjob_cells(o: dict[str, Any]) -> list[Any]:
    spec, s = o.get("spec") or {}, o.get("status") or {}
    names, images = _images(spec.get("jobTemplate") or {})
    last = s.get("lastScheduleTime")
    selector = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("selector")
    return [o["metadata"]["name"], spec.get("schedule", ""), spec.get("timeZone") or "<none>",
            "True" if spec.get("suspend") else "False", len(s.get("active") or []),
            human_age(last) if last else "<none>", _age(o), names, images,
            _selector({"spec": {"selector": selector}})]


def _pdb_cells(o: dict[str, Any]) -> list[Any]:
    spec, s = o.get("spec") or {}, o.get("status") or {}
    return [o["metadata"]["name"], spec.get("minAvailable", "N/A"), spec.get("maxUnavailable", "N/A"),
            s.get("disruptionsAllowed", 0), _age(o)]


_N = ("Name", "string", "name", 0)
_AGE = ("Age", "string", "", 0)
BUILTIN: dict[tuple[str, str], tuple[list[Column], Callable[[dict[str, Any]], list[Any]]]] = {
    ("", "pods"): ([_N, ("Ready", "string", "", 0), ("Status", "string", "", 0), ("Restarts", "string", "", 0),
                    _AGE, ("IP", "string", "", 1), ("Node", "string", "", 1), ("Nominated Node", "string", "", 1),
                    ("Readiness Gates", "string", "", 1)], _pod_cells),
    ("apps", "deployments"): ([_N, ("Ready", "string", "", 0), ("Up-to-date", "integer", "", 0),
                               ("Available", "integer", "", 0), _AGE, ("Containers", "string", "", 1),
                               ("Images", "string", "", 1), ("Selector", "string", "", 1)], _deploy_cells),
    ("apps", "replicasets"): ([_N, ("Desired", "integer", "", 0), ("Current", "integer", "", 0),
                               ("Ready", "integer", "", 0), _AGE, ("Containers", "string", "", 1),
                               ("Images", "string", "", 1), ("Selector", "string", "", 1)], _rs_cells),
    ("apps", "statefulsets"): ([_N, ("Ready", "string", "", 0), _AGE, ("Containers", "string", "", 1),
                                ("Images", "string", "", 1)], _sts_cells),
    ("", "services"): ([_N, ("Type", "string", "", 0), ("Cluster-IP", "string", "", 0),
                        ("External-IP", "string", "", 0), ("Port(s)", "string", "", 0), _AGE,
                        ("Selector", "string", "", 1)], _svc_cells),
    ("", "namespaces"): ([_N, ("Status", "string", "", 0), _AGE],
                         lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""), _age(o)]),
    ("", "configmaps"): ([_N, ("Data", "integer", "", 0), _AGE],
                         lambda o: [o["metadata"]["name"], len(o.get("data") or {}) + len(o.get("binaryData") or {}),
                                    _age(o)]),
    ("", "secrets"): ([_N, ("Type", "string", "", 0), ("Data", "integer", "", 0), _AGE],
                      lambda o: [o["metadata"]["name"], o.get("type", ""), len(o.get("data") or {}), _age(o)]),
    ("", "serviceaccounts"): ([_N, ("Secrets", "integer", "", 0), _AGE],
                              lambda o: [o["metadata"]["name"], len(o.get("secrets") or []), _age(o)]),
    ("", "events"): ([("Last Seen", "string", "", 0), ("Type", "string", "", 0), ("Reason", "string", "", 0),
                      ("Object", "string", "", 0), ("Message", "string", "", 0)], _event_cells),
    ("", "nodes"): ([_N, ("Status", "string", "", 0), ("Roles", "string", "", 0), _AGE,
                     ("Version", "string", "", 0)], _node_cells),
    ("batch", "jobs"): ([_N, ("Status", "string", "", 0), ("Completions", "string", "", 0),
                         ("Duration", "string", "", 0), _AGE, ("Containers", "string", "", 1),
                         ("Images", "string", "", 1), ("Selector", "string", "", 1)], _job_cells),
    ("batch", "cronjobs"): ([_N, ("Schedule", "string", "", 0), ("Timezone", "string", "", 0),
                             ("Suspend", "boolean", "", 0), ("Active", "integer", "", 0),
                             ("Last Schedule", "string", "", 0), _AGE, ("Containers", "string", "", 1),
                             ("Images", "string", "", 1), ("Selector", "string", "", 1)], _cronjob_cells),
    ("policy", "poddisruptionbudgets"): ([_N, ("Min Available", "string", "", 0),
                                          ("Max Unavailable", "string", "", 0),
                                          ("Allowed Disruptions", "integer", "", 0), _AGE], _pdb_cells),
    ("coordination.k8s.io", "leases"): ([_N, ("Holder", "string", "", 0), _AGE],
                                        lambda o: [o["metadata"]["name"],
                                                   (o.get("spec") or {}).get("holderIdentity", ""), _age(o)]),
    ("apiextensions.k8s.io", "customresourcedefinitions"): (
        [_N, ("Created At", "date", "", 0)],
        lambda o: [o["metadata"]["name"], o["metadata"].get("creationTimestamp", "")]),
}


def _crd_columns(rt: ResourceType, version: str) -> tuple[list[Column], Callable[[dict[str, Any]], list[Any]]]:
    cols = rt.printer_columns.get(version) or []
    if not cols:
        return [_N, ("Age", "date", "", 0)], lambda o: [o["metadata"]["name"], _age(o)]
    columns: list[Column] = [_N] + [(c["name"], c.get("type", "string"), c.get("format", ""),
                                     int(c.get("priority", 0))) for c in cols]

    def cells(o: dict[str, Any]) -> list[Any]:
        out: list[Any] = [o["metadata"]["name"]]
        for c in cols:
            values = evaluate(o, c["jsonPath"])
            if not values:
                out.append(None)
                continue
            value = values[0]
            if c.get("type") == "date" and isinstance(value, str):
                value = human_age(value)
            elif isinstance(value, (dict, list)):
                value = dumps(value)
            out.append(value)
        return out

    return columns, cells


def columns_for(rt: ResourceType, version: str) -> tuple[list[Column], Callable[[dict[str, Any]], list[Any]]]:
    """The columns and row function for a resource."""
    if not rt.builtin:
        return _crd_columns(rt, version)
    if (rt.group, rt.plural) in BUILTIN:
        return BUILTIN[(rt.group, rt.plural)]
    return [_N, ("Created At", "date", "", 0)], lambda o: [o["metadata"]["name"],
                                                          o["metadata"].get("creationTimestamp", "")]


def _row_object(obj: dict[str, Any], include: str, table_version: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{table_version}",
            "metadata": obj.get("metadata", {})}


def to_table(rt: ResourceType, version: str, objects: list[dict[str, Any]], *, include: str = "Metadata",
             table_version: str = "v1", list_meta: dict[str, Any] | None = None,
             with_columns: bool = True) -> dict[str, Any]:
    """A meta.k8s.io Table of ``objects`` (external form)."""
    columns, cells = columns_for(rt, version)
    table: dict[str, Any] = {"kind": "Table", "apiVersion": f"meta.k8s.io/{table_version}",
                             "metadata": list_meta or {}}
    if with_columns:
        table["columnDefinitions"] = [{"name": n, "type": t, "format": f, "description": "", "priority": p}
                                      for n, t, f, p in columns]
    else:
        table["columnDefinitions"] = None
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": cells(obj)[: len(columns)]}
        ro = _row_object(obj, include, table_version)
        if ro is not None:
            row["object"] = ro
        rows.append(row)
    table["rows"] = rows
    return table
