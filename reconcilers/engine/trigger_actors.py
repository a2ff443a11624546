"""A run's triggers completed from the record: who is behind each, as far as the record can establish it.

The controller only knows the field manager of a write (a claim, `manager:<name>`) and a manual request's token.
The run, which reads the object anyway, establishes more where it can, and only for the triggers that need it
(never on an ordinary run):

- a manual request: its row (`ReconcileRequest`, found by token) gives its id and its actor (`user:<name>` for
  the console and the API, `kube:<user>` or a claim for an annotation set with kubectl);
- a spec change (`generation` among the fields): the admitted write of exactly that spec makes the actor
  `kube:<user>` (`provenance.revision_actor`); the generation a rollback's own write returned makes the trigger a
  `rollback` with the rollback's actor;
- anything else keeps what the controller saw.

Then the trigger attributes of the run's span (`span_attributes`) and the loop anomalies (`loops_recorded`).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.utils import timezone

from reconcilers.core import actors
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import metrics, provenance, triggers
from reconcilers.models import Anomaly, AnomalyCategory, ReconcileRequest, Resource

log = logging.getLogger(__name__)


def resolve(kind: ResourceKind, obj: dict[str, Any], found: list[dict[str, Any]],
            rollback: dict[str, Any] | None) -> list[dict[str, Any]]:
    """`found` with the actors the record establishes (see the module docstring); never raises."""
    out = []
    for trigger in found:
        try:
            out.append(_resolved(kind, obj, trigger, rollback))
        except Exception:  # noqa: BLE001 - a trigger keeps what the controller saw
            log.debug("trigger not resolved: %r", trigger, exc_info=True)
            out.append(trigger)
    return out


def _resolved(kind: ResourceKind, obj: dict[str, Any], trigger: dict[str, Any],
              rollback: dict[str, Any] | None) -> dict[str, Any]:
    if trigger.get("type") == triggers.MANUAL and trigger.get("token") and not trigger.get("request"):
        row = ReconcileRequest.objects.filter(token=trigger["token"]).values("id", "actor").first()
        if row is not None:
            return {**trigger, "request": str(row["id"]), "actor": row["actor"],
                    "established": actors.established(row["actor"])}
        return trigger
    if (trigger.get("type") == triggers.EVENT and trigger.get("role") == triggers.SELF
            and "generation" in (trigger.get("fields") or ()) and actors.is_claim(trigger.get("actor"))):
        generation = int((obj.get("metadata") or {}).get("generation") or 0)
        manager = str(trigger.get("actor") or "").removeprefix(actors.MANAGER)
        actor, _entry = provenance.revision_actor(kind, obj, "" if manager == actors.UNKNOWN else manager, rollback)
        if actor.startswith(actors.ROLLBACK):
            return {**trigger, "type": triggers.ROLLBACK, "actor": actor, "established": "engine",
                    "generation": generation}
        if actor and not actors.is_claim(actor):
            return {**trigger, "actor": actor, "established": actors.established(actor), "generation": generation}
    return trigger


def span_attributes(found: list[dict[str, Any]], dropped: int) -> dict[str, Any]:
    """The run span's trigger attributes: each trigger in words, their labels, how many were dropped."""
    if not found and not dropped:
        return {}
    return {"opsconsole.triggers": [triggers.describe(t) for t in found],
            "opsconsole.triggers.labels": sorted({triggers.label(t) for t in found}),
            "opsconsole.triggers.dropped": dropped}


def loops_recorded(uid: str, found: list[dict[str, Any]], controller: str) -> list[int]:
    """An anomaly (category `loop`) for each trigger the controller marked as a loop, naming it: at most one per
    object and trigger in a minute. Returns the anomalies' ids (new or already on record)."""
    looping = [t for t in found if t.get("loop")]
    if not looping:
        return []
    resource = Resource.objects.filter(uid=uid).only("id", "cluster", "phase", "generation").first()
    if resource is None:
        return []
    ids, since = [], timezone.now() - timedelta(minutes=1)
    for trigger in looping:
        sig = triggers.signature(trigger)
        existing = (Anomaly.objects.filter(resource=resource, category=AnomalyCategory.LOOP, observed__signature=sig,
                                           created_at__gte=since).values_list("id", flat=True).first())
        if existing is not None:
            ids.append(existing)
            continue
        detail = (f"a reconcile loop: {triggers.describe(trigger)} enqueued this object {trigger['loop']} times "
                  f"within a minute (more than {triggers.LOOP_PER_MINUTE})")
        ids.append(Anomaly.objects.create(
            resource=resource, cluster=resource.cluster, from_phase=resource.phase, to_phase=resource.phase,
            reason="ReconcileLoop",
            message=detail, detail=detail, generation=resource.generation,
            actor=str(trigger.get("actor") or actors.UNKNOWN)[:255],
            category=AnomalyCategory.LOOP,
            observed={"signature": sig, "trigger": trigger, "count": trigger["loop"]}).id)
        metrics.ANOMALIES.labels(controller, "reconcile_loop").inc()
    return ids
