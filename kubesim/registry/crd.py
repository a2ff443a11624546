"""CustomResourceDefinition handling: validating a CRD and turning it into a served ResourceType."""

from __future__ import annotations

from typing import Any

from kubesim.errors import cause
from kubesim.meta import DNS1123_LABEL, DNS1123_SUBDOMAIN
from kubesim.registry import ResourceType, ScaleSpec, version_priority


def validate_crd(crd: dict[str, Any]) -> list[dict[str, str]]:
    """The apiextensions validation causes for a CRD (empty when valid)."""
    causes: list[dict[str, str]] = []
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group") or ""
    plural = names.get("plural") or ""
    name = (crd.get("metadata") or {}).get("name", "")
    if not group:
        causes.append(cause("spec.group", "FieldValueRequired", "Required value"))
    elif not DNS1123_SUBDOMAIN.match(group) or "." not in group:
        causes.append(cause("spec.group", "FieldValueInvalid",
                            f'Invalid value: "{group}": should be a domain with at least one dot'))
    if not plural:
        causes.append(cause("spec.names.plural", "FieldValueRequired", "Required value"))
    elif not DNS1123_LABEL.match(plural):
        causes.append(cause("spec.names.plural", "FieldValueInvalid", f'Invalid value: "{plural}": a lowercase '
                            "RFC 1123 label must consist of lower case alphanumeric characters or '-'"))
    if not names.get("kind"):
        causes.append(cause("spec.names.kind", "FieldValueRequired", "Required value"))
    if group and plural and name != f"{plural}.{group}":
        causes.append(cause("metadata.name", "FieldValueInvalid",
                            f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(cause("spec.scope", "FieldValueNotSupported",
                            f'Unsupported value: "{spec.get("scope", "")}": supported values: "Cluster", "Namespaced"'))
    versions = spec.get("versions") or []
    if not versions:
        causes.append(cause("spec.versions", "FieldValueInvalid", "Invalid value: null: must have exactly one "
                            "version marked as storage version"))
    elif sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(cause("spec.versions", "FieldValueInvalid", "Invalid value: []apiextensions."
                            "CustomResourceDefinitionVersion: must have exactly one version marked as storage version"))
    for i, v in enumerate(versions):
        if not v.get("name"):
            causes.append(cause(f"spec.versions[{i}].name", "FieldValueRequired", "Required value"))
        if "served" not in v:
            causes.append(cause(f"spec.versions[{i}].served", "FieldValueRequired", "Required value"))
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        if schema is None:
            causes.append(cause(f"spec.versions[{i}].schema.openAPIV3Schema", "FieldValueRequired",
                                "Required value: schemas are required"))
        elif schema.get("type") != "object":
            causes.append(cause(f"spec.versions[{i}].schema.openAPIV3Schema.type", "FieldValueRequired",
                                'Required value: must not be empty at the root'))
    causes += _conversion_causes(spec.get("conversion"))
    return causes


def crd_status(crd: dict[str, Any], when: str) -> dict[str, Any]:
    """The status an established CRD carries."""
    names = dict((crd.get("spec") or {}).get("names") or {})
    names.setdefault("singular", names.get("kind", "").lower())
    names.setdefault("listKind", names.get("kind", "") + "List")
    return {
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": when},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": when},
        ],
        "storedVersions": [v["name"] for v in crd["spec"]["versions"] if v.get("storage")],
    }


def resource_type_from_crd(crd: dict[str, Any]) -> ResourceType | None:
    """The ResourceType a CRD defines (None when it serves no version)."""
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec.get("versions") or [] if v.get("served")]
    if not served:
        return None
    versions = sorted((v["name"] for v in served), key=version_priority, reverse=True)
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    deprecated = {v["name"]: _deprecation_warning(spec, v, versions) for v in served if v.get("deprecated")}
    schemas: dict[str, dict[str, Any]] = {}
    columns: dict[str, list[dict[str, Any]]] = {}
    has_status = False
    scale: ScaleSpec | None = None
    selectable: list[str] = []
    for v in spec["versions"]:
        if v.get("served"):
            for f in v.get("selectableFields") or []:
                path = str(f.get("jsonPath", "")).lstrip(".")
                if path and path not in selectable:
                    selectable.append(path)
        schemas[v["name"]] = (v.get("schema") or {}).get("openAPIV3Schema") or {}
        columns[v["name"]] = v.get("additionalPrinterColumns") or []
        sub = v.get("subresources") or {}
        if v.get("served") and "status" in sub:
            has_status = True
        if v.get("served") and "scale" in sub:
            s = sub["scale"]
            scale = ScaleSpec(s.get("specReplicasPath", ".spec.replicas"),
                              s.get("statusReplicasPath", ".status.replicas"), s.get("labelSelectorPath"))
    return ResourceType(
        group=spec["group"],
        versions=versions,
        plural=names["plural"],
        singular=names.get("singular") or names["kind"].lower(),
        kind=names["kind"],
        namespaced=spec.get("scope") == "Namespaced",
        short_names=list(names.get("shortNames") or []),
        categories=list(names.get("categories") or []),
        status=has_status,
        scale=scale,
        storage_version=storage,
        tracks_generation=True,
        return_deleted=True,
        builtin=False,
        crd_name=crd["metadata"]["name"],
        schemas=schemas,
        printer_columns=columns,
        field_selectors=tuple(selectable),
        deprecated=deprecated,
    )


def _conversion_causes(conversion: Any) -> list[dict[str, str]]:
    """`spec.conversion`: strategy None (the default) or Webhook, which needs a clientConfig (a url or a service)
    and conversionReviewVersions with v1."""
    if conversion is None:
        return []
    if not isinstance(conversion, dict):
        return [cause("spec.conversion", "FieldValueInvalid", "Invalid value: must be an object")]
    strategy = conversion.get("strategy") or "None"
    if strategy not in ("None", "Webhook"):
        return [cause("spec.conversion.strategy", "FieldValueNotSupported",
                      f'Unsupported value: "{strategy}": supported values: "None", "Webhook"')]
    if strategy == "None":
        return []
    webhook = conversion.get("webhook") or {}
    causes = []
    config = webhook.get("clientConfig") or {}
    if bool(config.get("url")) == bool(config.get("service")):
        causes.append(cause("spec.conversion.webhook.clientConfig", "FieldValueRequired",
                            "Required value: exactly one of url or service is required"))
    if "v1" not in (webhook.get("conversionReviewVersions") or []):
        causes.append(cause("spec.conversion.webhook.conversionReviewVersions", "FieldValueRequired",
                            "Required value: must include at least one of v1, v1beta1"))
    return causes


def _deprecation_warning(spec: dict[str, Any], version: dict[str, Any], served: list[str]) -> str:
    """A deprecated version's `deprecationWarning`, or kube-apiserver's default: `example.com/v1alpha1 Gizmo is
    deprecated; use example.com/v1 Gizmo` (the most preferred served version that is not deprecated)."""
    if version.get("deprecationWarning"):
        return str(version["deprecationWarning"])
    group, kind = spec["group"], spec["names"]["kind"]
    current = {v["name"] for v in spec.get("versions") or [] if v.get("served") and not v.get("deprecated")}
    instead = next((name for name in served if name in current), None)
    warning = f"{group}/{version['name']} {kind} is deprecated"
    return f"{warning}; use {group}/{instead} {kind}" if instead else warning
