"""The one-object reads of the generic object page: which kinds it may show (`viewable_kinds`), and one object with
its owner chain up to the mirrored resource it belongs to and its Events, live and archived (`object_page`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import apiclient, kube, registry
from reconcilers.models import Resource
from reconcilers.services.selectors.health_tree import EVENT, LIST_TIMEOUT, POD, REPLICASET, tree_kinds
from reconcilers.services.selectors.resources import resource_events
from reconcilers.services.selectors.scope import scope_allows
from reconcilers.services.selectors.secrets import secret_redacted

log = logging.getLogger(__name__)

#: how many owners the owner chain follows at most
MAX_OWNERS = 5


def viewable_kinds() -> list[ResourceKind]:
    """The kinds the object page may show: every registered kind's `owns`, their descendants (ReplicaSets, Pods)
    and Events. Nothing else (no arbitrary kinds): the console's identity may read more than a user should see
    through the console. Secrets are viewable only where a registered kind owns them, and then only in a
    resource's owner chain and redacted (`object_page`)."""
    owns = [k for rec in registry.registered() for k in rec.owns]
    return tree_kinds([*owns, REPLICASET, POD, EVENT])


def viewable_kind(group: str, version: str, plural: str) -> ResourceKind | None:
    """The viewable kind at that address ('core' or '' for the core group), or None."""
    group = "" if group == "core" else group
    return next((k for k in viewable_kinds() if (k.group, k.version, k.plural) == (group, version, plural)), None)


@dataclass
class OwnerLink:
    """One owner in an object's owner chain: a mirrored resource (`resource_id`), a viewable object (`kind`
    set) or an object the console does not show (neither)."""

    api_version: str
    kind_name: str
    name: str
    namespace: str
    uid: str
    kind: ResourceKind | None = None
    resource_id: int | None = None

    @property
    def group_path(self) -> str:
        return (self.kind.group or "core") if self.kind else ""


@dataclass
class ObjectPage:
    """What the object page shows: the object (managedFields omitted), its owner chain (nearest owner first),
    its Events (live, then archived ones not live any more), the mirrored resource it belongs to, and an
    error message when a read failed."""

    obj: dict[str, Any]
    owners: list[OwnerLink] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    resource: Resource | None = None
    error: str = ""


class ObjectMissing(LookupError):
    """The object is not in the cluster."""


def _kind_by_type(api_version: str, kind_name: str) -> ResourceKind | None:
    return next((k for k in viewable_kinds() if (k.api_version, k.kind) == (api_version, kind_name)), None)


def _owner_refs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """An object's ownerReferences; an Event's is the object it is about (`involvedObject`)."""
    meta = obj.get("metadata") or {}
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict)]
    involved = obj.get("involvedObject")
    if not refs and obj.get("kind") == EVENT.kind and isinstance(involved, dict):
        refs = [{**involved, "controller": True}]
    return refs


def _owner_chain(api: Any, obj: dict[str, Any]) -> tuple[list[OwnerLink], Resource | None]:
    chain: list[OwnerLink] = []
    current = obj
    for _ in range(MAX_OWNERS):
        meta = current.get("metadata") or {}
        refs = _owner_refs(current)
        ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
        if not ref:
            break
        namespace = meta.get("namespace", "")
        link = OwnerLink(ref.get("apiVersion", ""), ref.get("kind", ""), ref.get("name", ""), namespace,
                         ref.get("uid", ""))
        chain.append(link)
        mirrored = Resource.objects.filter(uid=link.uid, deleted=False).first() if link.uid else None
        if mirrored is not None:
            link.resource_id, link.namespace = mirrored.pk, mirrored.namespace
            return chain, mirrored
        link.kind = _kind_by_type(link.api_version, link.kind_name)
        if link.kind is None:
            break
        link.namespace = namespace if link.kind.namespaced else ""
        owner = kube.get_object(api, link.kind, link.namespace or None, link.name, timeout=LIST_TIMEOUT)
        if owner is None or (owner.get("metadata") or {}).get("uid") != link.uid:
            break
        current = owner
    return chain, None


def _live_event(e: dict[str, Any]) -> dict[str, Any]:
    meta = e.get("metadata") or {}
    source = e.get("source") or {}
    return {"name": meta.get("name", ""), "type": e.get("type", ""), "reason": e.get("reason", ""),
            "message": e.get("message", ""), "count": e.get("count") or 1,
            "last_timestamp": e.get("lastTimestamp") or e.get("eventTime") or meta.get("creationTimestamp") or None,
            "source": source.get("component", "") if isinstance(source, dict) else str(source), "live": True}


def object_page(kind: ResourceKind, namespace: str, name: str, *, api: Any = None,
                namespaces: frozenset[str] | None = None) -> ObjectPage:
    """One object for its page: a GET, a GET per owner up to the mirrored resource (at most MAX_OWNERS), a LIST
    of its Events (fieldSelector involvedObject.uid), and the archived Events of that resource. Only an object in
    the owner chain of a mirrored resource within `namespaces` (None: any) is shown: any other object, one
    not in the cluster included, is ObjectMissing (the console's identity may read objects no registered resource
    owns). A Secret is shown redacted (`secret_redacted`). The API's errors are raised (the page says so)."""
    api = api or apiclient.get_api_client()
    ns = namespace if kind.namespaced else ""
    missing = ObjectMissing(f"{kind.kind} {ns + '/' if ns else ''}{name} is not in the cluster")
    obj = kube.get_object(api, kind, ns or None, name, timeout=LIST_TIMEOUT)
    if obj is None:
        raise missing
    obj.setdefault("apiVersion", kind.api_version)
    obj.setdefault("kind", kind.kind)
    (obj.get("metadata") or {}).pop("managedFields", None)
    page = ObjectPage(secret_redacted(obj))
    page.owners, page.resource = _owner_chain(api, obj)
    if page.resource is None or not scope_allows(namespaces, page.resource.cluster, page.resource.namespace):
        raise missing
    uid = (obj.get("metadata") or {}).get("uid", "")
    try:
        if uid:
            listed = kube.list_objects(api, EVENT, ns or None, field_selector=f"involvedObject.uid={uid}",
                                       timeout=LIST_TIMEOUT).items
            page.events = sorted((_live_event(e) for e in listed), key=lambda e: str(e["last_timestamp"] or ""),
                                 reverse=True)
    except Exception as exc:  # the object is shown; what could not be read is said
        log.info("object page of %s %s/%s partly read: %s", kind.kind, ns, name, exc)
        page.error = f"the Kubernetes API did not answer: {exc}"
    if page.resource is not None:
        live_names = {e["name"] for e in page.events}
        for e in resource_events(page.resource, limit=200):
            if (e["involved_kind"], e["involved_namespace"] or "", e["involved_name"]) == (kind.kind, ns, name) \
                    and e["name"] not in live_names:
                page.events.append({**e, "live": False})
    return page
