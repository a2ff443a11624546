"""The action record: appending one action (its outcome from the HTTP status, its cluster from its target, text
stored NUL-free), which records a reader limited to some namespaces may see, the record filtered, and one object's
admission decisions.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from opsconsole.accounts.targets import target_forms
from reconcilers.core.clusters import DEFAULT_CLUSTER, key_split
from reconcilers.engine.admission import legacy_object_target
from reconcilers.models import ActionRecord, Outcome
from reconcilers.services.selectors.scope import EVERY_CLUSTER, Scope


def outcome_for_status(status_code: int) -> str:
    """allowed (2xx/3xx), refused (401/403/429), rejected (other 4xx), failed (5xx)."""
    if status_code < 400:
        return Outcome.ALLOWED
    if status_code in (401, 403, 429):
        return Outcome.REFUSED
    if status_code < 500:
        return Outcome.REJECTED
    return Outcome.FAILED


def _storable(value: Any) -> Any:
    """`value` with NUL characters replaced (U+FFFD): PostgreSQL text and jsonb cannot hold them, and an action
    whose input carried one must still be recorded."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_storable(v) for v in value]
    return value


def action_record(
    *,
    action: str,
    method: str,
    path: str,
    status_code: int,
    actor: str = "",
    auth: str = "",
    token_prefix: str = "",
    target: str = "",
    reason: str = "",
    detail: dict[str, Any] | None = None,
    remote_addr: str = "",
    cluster: str = "",
) -> ActionRecord:
    """Append one action to the record; the outcome follows from the HTTP status. Text is stored NUL-free. The
    record's cluster is `cluster`, else the one a target that is a reconcile key names, else the default."""
    return ActionRecord.objects.create(
        cluster=cluster or target_cluster(target),
        actor=_storable(actor[:150]),
        auth=auth,
        token_prefix=token_prefix,
        action=action,
        method=_storable(method[:8]),
        path=_storable(path[:1024]),
        target=_storable(target[:1024]),
        reason=_storable(reason),
        outcome=outcome_for_status(status_code),
        status_code=status_code,
        detail=_storable(detail or {}),
        remote_addr=_storable(remote_addr[:64]),
    )


#: a namespace or a name as Kubernetes spells one (anything else cannot be in a target's namespace place)
_DNS_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
#: the actions a user asks through the API or the console (their own record of them, shown to them)
_REQUEST_AUTHS = ("session", "token")


def target_cluster(target: str) -> str:
    """The cluster a target names when it is a reconcile key, or a verbosity scope `object:<key>` (the default
    cluster otherwise)."""
    try:
        return key_split(target.removeprefix("object:"))[0]
    except ValueError:
        return DEFAULT_CLUSTER


def _namespace_forms_q(spaces: list[str], cluster_scope: bool, key_prefix: str) -> Q:
    """Records whose target names one of `spaces` (or, with `cluster_scope`, a cluster-scoped object), a key's
    cluster prefix matching `key_prefix` (a regex: '' for the default cluster's five-part keys)."""
    visible = Q(pk__in=[])
    if spaces:
        alternatives = "|".join(re.escape(ns).replace("\\-", "-") for ns in spaces)
        visible |= Q(target__regex=rf"^{key_prefix}[^/ ]*/[^/ ]+/[^/ ]+/({alternatives})/[^/ ]+$")
        visible |= Q(target__regex=rf"^[A-Z][A-Za-z0-9]* ({alternatives})/[^/ ]+$")
        visible |= Q(target__regex=rf"^kind=.* ns=({alternatives})$")
    if cluster_scope:  # the cluster scope: cluster-scoped objects
        visible |= (Q(target__regex=rf"^{key_prefix}[^/ ]*/[^/ ]+/[^/ ]+//[^/ ]+$")
                    | Q(target__regex=r"^[A-Z][A-Za-z0-9]* [^/ ]+$"))
    return visible


def action_record_visible(namespaces: frozenset[str] | None, username: str) -> Q:
    """Which action records someone limited to `namespaces` (None: not limited; a Scope: by cluster too) may
    read. A target names its namespace in one of three forms: a resource's key `group/version/plural/<ns>/<name>`
    (with its cluster in front outside the default cluster: reconcile, healing and annotation records),
    `Kind <ns>/<name>` (admission decisions, a Kind being CamelCase; `Kind <name>` cluster-scoped) and a bulk
    reconcile's `… ns=<ns>`; a grant of one cluster matches the key's cluster prefix and the record's cluster.
    A record whose target has no namespace (token creations, logins, queue-wide actions, a lookup by an id that
    found nothing one may see) is shown only to unlimited admins, or to the user it concerns: the target
    `user:<username>` or `<username>` (their tokens, their logins), or their own requests through the API or the
    console (whose targets never name an object outside their namespaces)."""
    if namespaces is None:
        return Q()
    pairs = namespaces.pairs if isinstance(namespaces, Scope) else {(EVERY_CLUSTER, ns) for ns in namespaces}
    by_cluster: dict[str, set[str]] = {}
    for cluster, ns in pairs:
        by_cluster.setdefault(cluster, set()).add(ns)
    visible = Q(pk__in=[])
    for cluster, held in sorted(by_cluster.items()):
        spaces = sorted(ns for ns in held if ns and _DNS_RE.match(ns))
        if cluster == EVERY_CLUSTER:
            visible |= _namespace_forms_q(spaces, "" in held, r"(?:[a-z0-9][-a-z0-9]*/)?")
        else:
            prefix = "" if cluster == DEFAULT_CLUSTER else re.escape(cluster).replace("\\-", "-") + "/"
            visible |= Q(cluster=cluster) & _namespace_forms_q(spaces, "" in held, prefix)
    if username:
        visible |= Q(target__in=[f"user:{username}", username]) | Q(actor=username, auth__in=_REQUEST_AUTHS)
    return visible


def action_record_list(
    *, actor: str = "", action: str = "", outcome: str = "", target: str = "", after: datetime | None = None,
    before: datetime | None = None, namespaces: frozenset[str] | None = None, username: str = "",
) -> QuerySet[ActionRecord]:
    """The action record filtered by actor, action, outcome, target (a prefix of an object's key:
    `cache.example.com/v1alpha1/memcacheds/team-a/` is every action about a Memcached in team-a, admission decisions
    about objects that never existed included; the older `Memcached team-a/` form matches the same) and
    time ([after, before)); not ordered. A value holding a NUL matches nothing (no record holds one: they are
    stored NUL-free). With `namespaces` (a reader limited to them) and `username` (the reader), only the records
    `action_record_visible` allows: the one rule for every path that reads the record."""
    qs = ActionRecord.objects.filter(action_record_visible(namespaces, username))
    if any("\x00" in value for value in (actor, action, outcome, target)):
        return qs.none()
    if target:  # either form of an object's name (opsconsole.accounts.targets)
        matches = Q()
        for form in target_forms(target):
            matches |= Q(target__startswith=form)
        qs = qs.filter(matches)
    if actor:
        qs = qs.filter(actor=actor)
    if action:
        qs = qs.filter(action=action)
    if outcome:
        qs = qs.filter(outcome=outcome)
    if after is not None:
        qs = qs.filter(created_at__gte=after)
    if before is not None:
        qs = qs.filter(created_at__lt=before)
    return qs


def admission_decisions(kind: str, namespace: str, name: str, *, key: str = "",
                        limit: int = 20) -> list[ActionRecord]:
    """The admission webhooks' decisions about one object, newest first: admitted, refused, dry runs, including
    those from before it existed; named by its `key` (as the recorder names its target) or, recorded before
    decisions used the key, `Kind namespace/name`."""
    targets = [legacy_object_target(kind, namespace, name), *([key] if key else [])]
    return list(ActionRecord.objects.filter(action__startswith="admission.", target__in=targets)
                .order_by("-seq")[:limit])
