"""Rows for the API tests: mirrored resources (of any cluster), chained transitions, runs, requests; users with
roles and grants; registered clusters."""

from __future__ import annotations

import itertools
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import Group, User
from django.utils import timezone

from opsconsole.accounts.models import NamespaceGrant
from reconcilers.core.clusters import DEFAULT_CLUSTER, key_join
from reconcilers.engine.audit import row_fields, transition_hash
from reconcilers.models import Cluster, ReconcileRun, Resource, Transition
from reconcilers.services.selectors.scope import parse_grant

MEMCACHED = {"group": "cache.example.com", "version": "v1alpha1", "plural": "memcacheds", "kind": "Memcached"}
TENANT = {"group": "tenancy.example.com", "version": "v1alpha1", "plural": "tenants", "kind": "Tenant"}
_n = itertools.count(1)


def user(username: str, role: str | None = None, namespaces: list[str] | None = None, **extra: Any) -> User:
    """A user with a role (a group) and optionally limited to namespaces: `team-a` (of every cluster) or
    `prod/team-a` (of cluster prod)."""
    u = User.objects.create_user(username=username, password="pw-" + username, **extra)
    if role:
        u.groups.add(Group.objects.get_or_create(name=role)[0])  # transactional tests flush the migration's rows
    for grant in namespaces or []:
        cluster_name, ns = parse_grant(grant)
        NamespaceGrant.objects.create(user=u, cluster=cluster_name, namespace=ns)
    return u


def cluster(name: str, *, labels: dict[str, str] | None = None, **fields: Any) -> Cluster:
    """A registered cluster (no real one behind it): its name, labels and any health field."""
    defaults: dict[str, Any] = {"server": f"https://{name}.example:6443", "identity": str(uuid.uuid4()),
                                "labels": labels or {}}
    defaults.update(fields)
    return Cluster.objects.update_or_create(name=name, defaults=defaults)[0]


def resource(name: str | None = None, namespace: str = "default", *, kind: dict[str, str] = MEMCACHED,
             phase: str = "Running", since: datetime | None = None, cluster: str = DEFAULT_CLUSTER,
             **fields: Any) -> Resource:
    """A mirrored resource (of `cluster`: its key carries the cluster's prefix outside the default one)."""
    name = name or f"r{next(_n)}"
    ns = "" if kind is TENANT else namespace
    key = key_join(cluster, "/".join((kind["group"], kind["version"], kind["plural"], ns, name)))
    defaults: dict[str, Any] = dict(
        uid=str(uuid.uuid4()), key=key, cluster=cluster, namespace=ns, name=name, phase=phase,
        phase_since=since or timezone.now() - timedelta(seconds=30), generation=1, observed_generation=1,
        labels={"app": "memcached"}, spec={"size": 1}, status={"phase": phase}, **kind,
    )
    defaults.update(fields)
    return Resource.objects.create(**defaults)


def transition(res: Resource, to_phase: str, *, actor: str = "controller", at: datetime | None = None,
               run: ReconcileRun | None = None) -> Transition:
    """Append a chained transition to the resource (and move its mirror's head and phase)."""
    seq = res.last_transition_seq + 1
    t = Transition(
        resource=res, resource_uid=res.uid, cluster=res.cluster, kind=res.kind, namespace=res.namespace,
        name=res.name, seq=seq,
        from_phase=res.phase if seq > 1 else "", to_phase=to_phase, reason="Test", message="", actor=actor,
        run=run, created_at=at or timezone.now(), prev_hash=res.last_transition_hash, hash="",
    )
    t.run_id = run.pk if run else None
    t.hash = transition_hash(row_fields(t), res.last_transition_hash)
    t.save()
    Resource.objects.filter(pk=res.pk).update(phase=to_phase, last_transition_seq=seq, last_transition_hash=t.hash)
    res.refresh_from_db()
    return t


def run(res: Resource, *, result: str = "success", duration: float = 0.1, at: datetime | None = None) -> ReconcileRun:
    """A reconcile run of the resource."""
    return ReconcileRun.objects.create(
        key=res.key, cluster=res.cluster, kind=res.kind, resource=res, started_at=at or timezone.now(),
        duration_seconds=duration,
        result=result, error_class="Boom" if result == "error" else "", worker="w1", trace_id="ab" * 16,
    )
