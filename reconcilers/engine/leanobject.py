"""An object without what nothing that reads it needs: its `metadata.managedFields` and the
`kubectl.kubernetes.io/last-applied-configuration` annotation (kubectl's client-side apply copies the whole object
into it), the two heaviest parts of most objects (issue 40: memory per object that fits a fleet).

Used where those are not read: the controller's informer caches (`controller/slim.py`) and the object cache's
entries of children (`objectcache`: a child's entry is read only to tell whether an apply would change anything,
and as that apply's answer). The reconciled objects' entries keep both: a run reads managedFields (the field
manager of a spec change, provenance) and hands its object to the kind's code as the API has it.
"""

from __future__ import annotations

from typing import Any

#: the annotation kubectl's client-side apply keeps the whole applied object in
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` without metadata.managedFields and the last-applied annotation (an annotations map left empty goes
    too); the rest shared, not copied. Idempotent."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    annotations = meta.get("annotations")
    heavy_annotation = isinstance(annotations, dict) and LAST_APPLIED in annotations
    if "managedFields" not in meta and not heavy_annotation:
        return obj
    kept = {k: v for k, v in meta.items() if k != "managedFields"}
    if heavy_annotation:
        rest = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        if rest:
            kept["annotations"] = rest
        else:
            del kept["annotations"]
    return {**obj, "metadata": kept}
