"""PodSpec rules shared by every kind that holds one (Pods, workload and Job templates): defaults, validation."""

from __future__ import annotations

from typing import Any

from kubesim.errors import cause
from kubesim.meta import DNS1123_LABEL

Causes = list[dict[str, str]]


def _image_pull_policy(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def default_pod_spec(spec: dict[str, Any], *, template: bool) -> None:
    """Fill a PodSpec's defaults (as the apiserver's defaulting functions do)."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if not isinstance(c, dict):
                continue
            c.setdefault("imagePullPolicy", _image_pull_policy(str(c.get("image", ""))))
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})
            for p in c.get("ports") or []:
                if isinstance(p, dict):
                    p.setdefault("protocol", "TCP")
    if not template:
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("priority", 0)
        spec.setdefault("tolerations", [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
        ])


def validate_pod_spec(spec: Any, path: str) -> Causes:
    """Required container fields and unique names."""
    causes: Causes = []
    if not isinstance(spec, dict):
        return [cause(path, "FieldValueRequired", "Required value")]
    containers = spec.get("containers")
    if not containers:
        causes.append(cause(f"{path}.containers", "FieldValueRequired", "Required value"))
        return causes
    names: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            p = f"{path}.{key}[{i}]"
            name = c.get("name") if isinstance(c, dict) else None
            if not name:
                causes.append(cause(f"{p}.name", "FieldValueRequired", "Required value"))
            elif not DNS1123_LABEL.match(name):
                causes.append(cause(f"{p}.name", "FieldValueInvalid", f'Invalid value: "{name}": a lowercase RFC '
                                    "1123 label must consist of lower case alphanumeric characters or '-'"))
            elif name in names:
                causes.append(cause(f"{p}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
            else:
                names.add(name)
            if isinstance(c, dict) and not c.get("image"):
                causes.append(cause(f"{p}.image", "FieldValueRequired", "Required value"))
    if spec.get("restartPolicy") not in (None, "Always", "OnFailure", "Never"):
        causes.append(cause(f"{path}.restartPolicy", "FieldValueNotSupported",
                            f'Unsupported value: "{spec["restartPolicy"]}": supported values: "Always", '
                            '"OnFailure", "Never"'))
    return causes
