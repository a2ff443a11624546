"""What if, for the API, the console and `manage.py whatif`: `resource_whatif(resource, spec)` previews a candidate
spec of one mirrored object with the kind's real step, every write a server-side dry run
(`reconcilers.engine.whatif`), and stores nothing: no transition, no run, no revision. The callers authorise it
as a manual reconcile (the operator role, the object's namespace) and audit it (an ActionRecord per preview).

`spec_from_text(text)` reads the candidate from YAML or JSON: the spec itself, or a whole object whose `spec` is
taken (as `kubectl apply -f` would hold it). Bad input is a `WhatIfInputError` naming the field.
"""

from __future__ import annotations

from typing import Any

import yaml

from reconcilers.engine import apiclient, kube, registry
from reconcilers.engine.whatif import WhatIf, what_if
from reconcilers.models import Resource

__all__ = ["MAX_TEXT", "WhatIf", "WhatIfError", "WhatIfInputError", "resource_whatif", "spec_from_text"]

#: the longest candidate text read (a spec is small; an object with status and managedFields is still far below)
MAX_TEXT = 256 * 1024


class WhatIfError(Exception):
    """The preview could not run: the object or its kind is gone, or the Kubernetes API did not answer."""

    def __init__(self, message: str, *, status: int = 503) -> None:
        super().__init__(message)
        self.status = status


class WhatIfInputError(WhatIfError):
    """The candidate is not a spec: `field` names what is wrong."""

    def __init__(self, message: str, field: str = "spec") -> None:
        super().__init__(message, status=400)
        self.field = field


def spec_from_text(text: str) -> dict[str, Any]:
    """The candidate spec in YAML (or JSON) text: a mapping that is the spec, or a whole object (apiVersion, kind,
    spec) whose spec is meant."""
    if len(text) > MAX_TEXT:
        raise WhatIfInputError(f"the candidate is {len(text)} characters; at most {MAX_TEXT} are read")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WhatIfInputError(f"not YAML: {exc}") from None
    return candidate_spec(data)


def candidate_spec(data: Any) -> dict[str, Any]:
    """The spec in `data` (the spec itself, or an object with one)."""
    if not isinstance(data, dict):
        raise WhatIfInputError(f"the spec must be a mapping, not {type(data).__name__}")
    if "spec" in data and ("apiVersion" in data or "kind" in data or "metadata" in data):
        data = data["spec"]
        if not isinstance(data, dict):
            raise WhatIfInputError(f"spec must be a mapping, not {type(data).__name__}")
    return data


def resource_whatif(resource: Resource, spec: Any) -> WhatIf:
    """Preview `spec` for `resource` (see the module docstring). WhatIfError when it cannot run: the kind is not
    registered (404), the object is gone (404), the Kubernetes API did not answer (503)."""
    spec = candidate_spec(spec)
    if resource.deleted:
        raise WhatIfError(f"{resource.kind} {resource.namespace}/{resource.name} was deleted", status=404)
    try:
        reconciler = registry.for_kind(resource.group, resource.plural)
    except registry.UnknownKind as exc:
        raise WhatIfError(f"no reconciler for {resource.kind} here: {exc}", status=404) from exc
    api = apiclient.get_api_client(resource.cluster)
    try:
        live = kube.get_object(api, reconciler.resource, resource.namespace or None, resource.name)
    except Exception as exc:
        raise WhatIfError(f"the Kubernetes API did not answer: {type(exc).__name__}: {exc}") from exc
    if live is None:
        raise WhatIfError(f"{resource.kind} {resource.namespace}/{resource.name} is no longer in the cluster",
                          status=404)
    try:
        return what_if(reconciler, api, live, spec, resource.phase or None)
    except kube.ApiException as exc:
        raise WhatIfError(f"the Kubernetes API answered {exc.status}: {exc.reason}") from exc
    except (OSError, ValueError) as exc:  # urllib3's connection errors are OSErrors
        raise WhatIfError(f"the Kubernetes API did not answer: {type(exc).__name__}: {exc}") from exc
