"""Writing an object's status by hand, as another client (kubectl --subresource=status) would: tests use it to
change status behind the engine's back. The engine itself writes status only through the reconcile step."""

from __future__ import annotations

from typing import Any

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube


def patch_status(api: Any, kind: ResourceKind, namespace: str | None, name: str, patch: dict[str, Any]) -> Any:
    """A JSON merge patch through the object's /status subresource; the object as written."""
    return kube.request_json(api, "PATCH", kube.object_path(kind, namespace, name, "status"), body=patch,
                             content_type=kube.MERGE_PATCH)
