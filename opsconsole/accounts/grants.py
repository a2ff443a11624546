"""Namespace grants by cluster: parse and check a grant as written (`cluster/namespace`, `namespace` for every
cluster, `cluster/` for one cluster's cluster scope, '' for every cluster's), add, remove and list a user's.
What a user's grants let them see is decided in `roles.user_namespaces` (a `Scope`)."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from opsconsole.accounts.models import NamespaceGrant
from reconcilers.core.clusters import cluster_name_check
from reconcilers.services.selectors.scope import grant_text, parse_grant

_NAMESPACE_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class GrantError(ValueError):
    """A grant that cannot be written as given."""


def grant_parse(text: str) -> tuple[str, str]:
    """(cluster, namespace) of a grant as written, checked: the cluster a cluster name ('' every cluster), the
    namespace a Kubernetes namespace name ('' the cluster scope). GrantError otherwise."""
    if "\x00" in text or len(text) > 127:
        raise GrantError(f"not a grant: {text[:80]!r}")
    cluster, namespace = parse_grant(text)
    if cluster:
        try:
            cluster_name_check(cluster)
        except ValueError as exc:
            raise GrantError(str(exc)) from exc
    if namespace and not _NAMESPACE_RE.match(namespace):
        raise GrantError(f"a namespace is a DNS label (lower-case letters, digits and '-'), not {namespace!r}")
    return cluster, namespace


def grants_of(user: Any) -> list[str]:
    """The user's grants as written, sorted."""
    return sorted(grant_text(c, ns) for c, ns in user.namespace_grants.values_list("cluster", "namespace"))


def grants_add(user: Any, texts: list[str]) -> list[str]:
    """Add grants (each checked first: none is added when one is bad); the ones that were new, as written."""
    pairs = [grant_parse(t) for t in texts]
    added: list[str] = []
    with transaction.atomic():
        for cluster, namespace in pairs:
            _grant, created = NamespaceGrant.objects.get_or_create(user=user, cluster=cluster, namespace=namespace)
            if created:
                added.append(grant_text(cluster, namespace))
    return added


def grants_remove(user: Any, texts: list[str]) -> list[str]:
    """Remove grants (each checked first); the ones the user had, as written. A user left without any grant is
    no longer limited: the caller says so."""
    pairs = [grant_parse(t) for t in texts]
    removed: list[str] = []
    with transaction.atomic():
        for cluster, namespace in pairs:
            deleted, _ = NamespaceGrant.objects.filter(user=user, cluster=cluster, namespace=namespace).delete()
            if deleted:
                removed.append(grant_text(cluster, namespace))
    return removed
