"""kube-apiserver's namespace rule for Events (core/v1 ``events`` and events.k8s.io/v1, one storage).

``legacyValidateEvent`` (pkg/apis/core/validation/events.go), on create and update, through either API: an Event
without ``eventTime`` (the core/v1 recorders') must be in its involved object's namespace (``involvedObject``;
``regarding`` in events.k8s.io/v1), or, about a cluster-scoped object, in ``default`` (or have no namespace); an
Event with ``eventTime`` about a cluster-scoped object must be in ``default`` or ``kube-system``. Anything else
is 422 Invalid on ``involvedObject.namespace`` (the internal field's name, whichever API was used):
``Event "x" is invalid: involvedObject.namespace: Invalid value: "b": does not match event.namespace``.

As in kube-apiserver, an Event with ``eventTime`` about an object of another namespace is not refused: a reader
must not take an Event's ``regarding`` for proof of where it was written.
"""

from __future__ import annotations

import json
from typing import Any

from kubesim.cluster.podspec import Causes
from kubesim.errors import cause


def validate_event(obj: dict[str, Any]) -> Causes:
    """The namespace causes of an Event in its storage form (core/v1 field names)."""
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    involved = obj.get("involvedObject")
    involved_ns = (involved.get("namespace") or "") if isinstance(involved, dict) else ""
    if not isinstance(involved_ns, str):
        involved_ns = str(involved_ns)
    if not obj.get("eventTime"):
        ok = namespace in ("", "default") if not involved_ns else namespace == involved_ns
    else:
        ok = bool(involved_ns) or namespace in ("default", "kube-system")
    if ok:
        return []
    return [cause("involvedObject.namespace", "FieldValueInvalid",
                  f"Invalid value: {json.dumps(involved_ns)}: does not match event.namespace")]
