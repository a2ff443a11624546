"""The healing evaluator: one step, run by the controller while it leads (every `OPSCONSOLE_HEALING_INTERVAL`).

For each registered kind, one step:
1. matches the kind's anomaly rules against the record — the Events archive (`events` rules: the occurrences
   summed over the window), the transitions of the kind in its group (`flapping`: a kind of the same name in
   another group is another kind), the resources' phases and since when (`stuck`) — with one aggregate query per
   rule, and records each rule that starts or stops matching a resource (an
   `anomaly.detected` / `anomaly.cleared` healing record, the resource's active anomalies, the counter);
2. concludes what has run its course: a rollback whose restored generation was not ready by its deadline is
   escalated; an escalation ends (and its `rollback_failed` anomaly clears) once a later generation is ready;
3. takes the automatic path where it is on (the kind, the settings or the object's annotation) and the resource
   is not suspended: `rollback.rollback_due` says whether to roll back (`rollback_apply`) or to escalate;
4. enqueues the keys whose conditions changed and those whose suspension has ended;
5. sets the gauges (`opsconsole_anomalies_active`, `opsconsole_resources_suspended`,
   `opsconsole_anomalies_unacknowledged_seconds`);
6. sends the notifications due (`notifications.deliver_due`: a few short POSTs, bounded per step).

It imports the database and the API client but no Celery; the controller passes a cache of the objects'
annotations (its informers; the mirror's copy of the auto-rollback annotation otherwise), so the step makes no
API call of its own but the rollbacks and the escalations' Events.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.core.healing import AnomalyRule
from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import kube, metrics
from reconcilers.engine.healing import auto_rollback_enabled, healing_of, notifications
from reconcilers.engine.healing.automatic import automatic, conclude
from reconcilers.engine.healing.escalate import Escalation
from reconcilers.engine.healing.metric_rules import MetricState
from reconcilers.engine.healing.person import unacknowledged_seconds
from reconcilers.engine.healing.report import HealReport
from reconcilers.engine.healing.rules import match_rules, record_matches
from reconcilers.engine.healing.state import moment
from reconcilers.models import Resource

log = logging.getLogger(__name__)

def default_interval() -> float:
    """settings.OPSCONSOLE_HEALING_INTERVAL (seconds, default 2; 0: no healing step)."""
    from django.conf import settings

    return float(getattr(settings, "OPSCONSOLE_HEALING_INTERVAL", 2))


class Evaluator:
    """The healing step over `reconcilers` (see the module docstring). `annotations(reconciler, resource)` gives
    an object's annotations from a cache (None: not cached, read through the API). It looks at the rows of
    `cluster` only, the cluster `api` reaches (each cluster's controller heals its own)."""

    def __init__(self, api: Any, reconcilers: Sequence[Reconciler], *,
                 annotations: Callable[[Reconciler, Resource], dict[str, Any] | None] | None = None,
                 enqueue: Callable[[list[str]], Any] | None = None, cluster: str = DEFAULT_CLUSTER) -> None:
        self.api = api
        self.cluster = cluster
        self.reconcilers = list(reconcilers)
        self.annotations = annotations
        self.enqueue = enqueue
        self._settled: set[tuple[int, int]] = set()  # (resource, generation) that reached ready: not a bad change
        self._expiry_sent: dict[int, str] = {}
        self.metric_state = MetricState()  # the metric rules' consecutive evaluations (in memory, `metric_rules`)
        for rec in self.reconcilers:
            try:
                metrics.healing_label_pairs_init(rec.resource.kind, [r.name for r in healing_of(rec).rules or ()])
            except Exception:  # a bad rule setting is reported by the step, not here
                log.debug("healing metrics not initialised for %s", rec.resource.kind, exc_info=True)

    def step(self, now: datetime | None = None) -> HealReport:
        """One round over every kind; a kind whose step fails is logged and the others go on."""
        now = now or timezone.now()
        report = HealReport()
        for rec in self.reconcilers:
            try:
                self._kind_step(rec, now, report)
            except Exception:
                log.warning("healing: the step for %s failed", rec.resource.kind, exc_info=True)
        for escalation in report.escalations:
            self._post_warning(escalation)
        try:  # the notifications due (bounded: a few short POSTs per step)
            notifications.deliver_due()
        except Exception:
            log.warning("healing: the notifications could not be sent", exc_info=True)
        if report.keys and self.enqueue is not None:
            try:
                self.enqueue(sorted(set(report.keys)))
            except Exception:
                log.warning("healing: could not enqueue %d keys", len(report.keys), exc_info=True)
        return report

    # -- one kind ------------------------------------------------------------------------------------------------

    def _kind_step(self, rec: Reconciler, now: datetime, report: HealReport) -> None:
        healing = healing_of(rec)
        live = Resource.objects.filter(cluster=self.cluster, group=rec.resource.group, plural=rec.resource.plural,
                                       deleted=False)
        record_matches(live, match_rules(rec, healing.rules or (), live, now, metric_state=self.metric_state), now,
                       report, api=self.api, rules=healing.rules or ())
        conclude(rec, live, now, report)
        automatic(self.api, rec, live, healing.rollback_after_seconds, now, report, settled=self._settled,
                  enabled=self._auto_rollback)
        self._expiries(live, now, report)
        self._gauges(rec, healing.rules or (), live)

    def _expiries(self, live: Any, now: datetime, report: HealReport) -> None:
        for rid, key, suspension in live.filter(suspended=True).values_list("id", "key", "suspension"):
            until = (suspension or {}).get("until")
            ends = moment(until)
            if ends is not None and ends <= now and self._expiry_sent.get(rid) != until:
                self._expiry_sent[rid] = until
                report.keys.append(key)

    def _gauges(self, rec: Reconciler, rules: Sequence[AnomalyRule], live: Any) -> None:
        kind = rec.resource.kind
        counts: dict[str, int] = dict.fromkeys([r.name for r in rules] + [metrics.ROLLBACK_FAILED_RULE], 0)
        for anomalies in live.exclude(active_anomalies={}).values_list("active_anomalies", flat=True):
            for rule in anomalies or {}:
                counts[rule] = counts.get(rule, 0) + 1
        for rule, n in counts.items():
            metrics.ANOMALIES_ACTIVE.labels(kind, rule).set(n)
        metrics.SUSPENDED.labels(kind).set(live.filter(suspended=True).count())
        metrics.ANOMALIES_UNACKNOWLEDGED.labels(kind).set(unacknowledged_seconds(rec, rules, live))

    # -- around it -----------------------------------------------------------------------------------------------

    def _auto_rollback(self, rec: Reconciler, resource: Resource) -> bool:
        """Whether automatic rollback is on for the object: its annotation as the informer cache has it (the
        freshest), else as the mirror last saw it, else the kind's."""
        cached = self.annotations(rec, resource) if self.annotations is not None else None
        if cached is not None:
            return auto_rollback_enabled(rec, cached)
        if resource.auto_rollback is not None:
            return resource.auto_rollback
        return auto_rollback_enabled(rec, None)

    def _post_warning(self, escalation: Escalation) -> None:
        """The escalation's Warning Event about the object (best effort: the record is the record)."""
        from reconcilers.engine.context import EngineContext

        rec = next((r for r in self.reconcilers if escalation.key.startswith(
            f"{r.resource.group}/{r.resource.version}/{r.resource.plural}/")), None)
        resource = Resource.objects.filter(pk=escalation.resource_id).first()
        if rec is None or resource is None:
            return
        try:
            obj = kube.get_object(self.api, rec.resource, resource.namespace or None, resource.name)
            if obj is not None:
                EngineContext(rec, obj, self.api).event("Warning", escalation.reason, escalation.message)
        except Exception:
            log.warning("healing: could not post the %s event for %s", escalation.reason, resource, exc_info=True)

