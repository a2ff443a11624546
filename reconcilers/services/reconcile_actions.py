"""Manual reconciles asked through the API or the console, one resource or many.

Both go through `reconcile_request_create` (the one path the shell, the console and the API share): a
`ReconcileRequest` row per resource, the annotation, an immediate enqueue. A bulk request selects resources
by kind plus a label selector and/or phase, within the caller's namespaces, and reports each resource's
outcome: one failure does not stop the others.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

from reconcilers.models import ReconcileRequest, Resource
from reconcilers.services.reconcile_requests import (
    IdempotencyConflict,
    ObjectNotFound,
    ReconcileRequestError,
    reconcile_request_create,
)
from reconcilers.services.selectors.filters import InvalidFilter
from reconcilers.services.selectors.resources import ResourceFilters, resource_list

log = logging.getLogger(__name__)

__all__ = [
    "BulkFailure",
    "BulkOutcome",
    "IdempotencyConflict",
    "ObjectNotFound",
    "ReconcileRequestError",
    "resource_reconcile",
    "resource_reconcile_bulk",
    "resource_reconcile_selection",
]


def resource_reconcile(
    resource: Resource, *, actor: str, reason: str, idempotency_key: str | None = None
) -> ReconcileRequest:
    """Ask for a reconcile of one mirrored resource (see reconcile_request_create for the errors)."""
    return reconcile_request_create(resource, actor=actor, reason=reason, idempotency_key=idempotency_key or None)


@dataclass
class BulkFailure:
    """A resource of a bulk request that could not be asked for."""

    resource: Resource
    error: str
    code: str


@dataclass
class BulkOutcome:
    """What a bulk request did: the requests made and the resources that failed."""

    matched: int = 0
    requested: list[ReconcileRequest] = field(default_factory=list)
    failed: list[BulkFailure] = field(default_factory=list)


def _item_key(idempotency_key: str, resource: Resource) -> str:
    """The per-resource idempotency key derived from a bulk request's key (bounded length)."""
    digest = hashlib.sha256(f"{idempotency_key}\0{resource.uid}".encode()).hexdigest()[:32]
    return f"bulk:{digest}"


def resource_reconcile_bulk(
    *,
    kind: str,
    actor: str,
    reason: str,
    selector: str = "",
    phase: str = "",
    namespace: str = "",
    namespaces: frozenset[str] | None = None,
    idempotency_key: str | None = None,
    max_items: int = 500,
    cluster: str = "",
) -> BulkOutcome:
    """Ask for a reconcile of every visible resource of `kind` matching `selector` / `phase` / `namespace` (and
    of `cluster`, when given: InvalidFilter naming `cluster` for a bad name).

    Raises InvalidFilter when nothing narrows the kind (a selector or a phase is required), for a bad selector,
    or when more than `max_items` match. With an idempotency key, repeating the call returns the same
    requests (each resource gets a key derived from it)."""
    if not kind:
        raise InvalidFilter("kind", "This field is required.")
    if not selector and not phase:
        raise InvalidFilter("selector", "give a label selector or a phase (or both)")
    qs = resource_list(
        ResourceFilters(kind=kind, namespace=namespace, phase=phase, selector=selector, cluster=cluster),
        namespaces=namespaces,
    ).order_by("id")
    resources = list(qs[: max_items + 1])
    if len(resources) > max_items:
        raise InvalidFilter("selector", f"more than {max_items} resources match; narrow the selection")
    outcome = BulkOutcome(matched=len(resources))
    for resource in resources:
        key = _item_key(idempotency_key, resource) if idempotency_key else None
        try:
            outcome.requested.append(resource_reconcile(resource, actor=actor, reason=reason, idempotency_key=key))
        except ObjectNotFound as exc:
            outcome.failed.append(BulkFailure(resource, str(exc), "not_found"))
        except ReconcileRequestError as exc:
            outcome.failed.append(BulkFailure(resource, str(exc), "failed"))
        except Exception as exc:  # the Kubernetes API or Redis failed for this one: report it, go on
            log.warning("bulk reconcile of %s failed: %s", resource, exc)
            outcome.failed.append(BulkFailure(resource, f"{type(exc).__name__}: {exc}", "unavailable"))
    return outcome


def resource_reconcile_selection(
    ids: list[int],
    *,
    actor: str,
    reason: str,
    namespaces: frozenset[str] | None = None,
    max_items: int = 500,
) -> BulkOutcome:
    """Ask for a reconcile of each visible resource among `ids` (the console's checked rows); ids that are not
    visible are ignored. Raises InvalidFilter when none is given or more than `max_items` are."""
    wanted = sorted(set(ids))
    if not wanted:
        raise InvalidFilter("ids", "select at least one resource")
    if len(wanted) > max_items:
        raise InvalidFilter("ids", f"more than {max_items} resources selected")
    resources = list(resource_list(ResourceFilters(), namespaces=namespaces).filter(pk__in=wanted).order_by("id"))
    outcome = BulkOutcome(matched=len(resources))
    for resource in resources:
        try:
            outcome.requested.append(resource_reconcile(resource, actor=actor, reason=reason))
        except ObjectNotFound as exc:
            outcome.failed.append(BulkFailure(resource, str(exc), "not_found"))
        except ReconcileRequestError as exc:
            outcome.failed.append(BulkFailure(resource, str(exc), "failed"))
        except Exception as exc:  # the Kubernetes API or Redis failed for this one: report it, go on
            log.warning("reconcile of %s failed: %s", resource, exc)
            outcome.failed.append(BulkFailure(resource, f"{type(exc).__name__}: {exc}", "unavailable"))
    return outcome
