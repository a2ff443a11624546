"""ConversionReview v1 answers for the registered kinds with several versions (`Reconciler.versions`): each object
goes from its version to the storage version (`resource.version`, the hub) and from there to the desired one, hub
and spoke, with the kind's `to_storage` / `from_storage` functions; `apiVersion` is set by the engine, and the
metadata's name, namespace and uid are kept whatever a function returns. A function that raises, or an unknown
version, fails the review (`result.status: Failure` naming the object and the error): the API server then fails
the request instead of serving a wrong shape."""

from __future__ import annotations

import copy
from typing import Any

from reconcilers.core.reconciler import KindVersion, Reconciler


class ConversionError(ValueError):
    """An object this kind cannot convert."""


def _version_of(api_version: str) -> str:
    return api_version.rpartition("/")[2]


def _spoke(rec: Reconciler, name: str) -> KindVersion:
    for version in rec.versions:
        if version.name == name:
            return version
    raise ConversionError(f"{rec.resource.kind} has no version {name!r} (it serves {rec.resource.version}"
                          f"{''.join(', ' + v.name for v in rec.versions)})")


def convert_object(rec: Reconciler, obj: dict[str, Any], desired_api_version: str) -> dict[str, Any]:
    """`obj` in `desired_api_version`, through the storage version."""
    group, storage = rec.resource.group, rec.resource.version
    source, target = _version_of(str(obj.get("apiVersion") or "")), _version_of(desired_api_version)
    if desired_api_version.rpartition("/")[0] != group:
        raise ConversionError(f"{desired_api_version} is not a version of {group}")
    meta = copy.deepcopy(obj.get("metadata") or {})
    out = copy.deepcopy(obj)
    if source != target:
        if source != storage:
            out = _spoke(rec, source).to_storage(out)
        if target != storage:
            out = _spoke(rec, target).from_storage(out)
    out["apiVersion"] = desired_api_version
    out["kind"] = obj.get("kind", rec.resource.kind)
    converted_meta = out.setdefault("metadata", {})
    for key in ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp"):
        if key in meta:
            converted_meta[key] = meta[key]
    return out


def review_convert(rec: Reconciler, review: dict[str, Any]) -> dict[str, Any]:
    """The `response` of a ConversionReview."""
    request = review.get("request") if isinstance(review, dict) else None
    if not isinstance(request, dict) or not request.get("uid"):
        raise ConversionError("not a ConversionReview v1 request: request.uid is missing")
    desired = str(request.get("desiredAPIVersion") or "")
    converted = []
    for obj in request.get("objects") or []:
        try:
            converted.append(convert_object(rec, obj, desired))
        except Exception as exc:  # noqa: BLE001 - a kind's function never takes the webhook down
            meta = (obj or {}).get("metadata") or {}
            where = f"{meta.get('namespace') + '/' if meta.get('namespace') else ''}{meta.get('name', '')}"
            return {"uid": request["uid"], "result": {
                "status": "Failure",
                "message": f"{rec.resource.kind} {where} from {obj.get('apiVersion')} to {desired}: "
                           f"{type(exc).__name__}: {exc}"}}
    return {"uid": request["uid"], "convertedObjects": converted, "result": {"status": "Success"}}
