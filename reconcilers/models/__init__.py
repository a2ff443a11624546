"""The engine's tables: the Resource mirror, the audit trail and runs, manual requests, spans, the action record.

`Transition`, `SpecRevision`, `HealingRecord`, `KubeEvent`, `ReconcileRun` and `ActionRecord` are append-only (see
`reconcilers.models.base`).
"""

from reconcilers.models.actions import ActionRecord, Outcome
from reconcilers.models.aggregates import ResourceCount, ResourceCountDelta, TransitionCount, TransitionCountDelta
from reconcilers.models.audit import Anomaly, AnomalyCategory, SpecRevision, Transition
from reconcilers.models.base import AppendOnlyError, AppendOnlyModel
from reconcilers.models.captures import RunCapture
from reconcilers.models.clusters import Cluster
from reconcilers.models.healing import HealingAction, HealingRecord, KubeEvent, NotificationDelivery
from reconcilers.models.resource import Resource
from reconcilers.models.runs import ReconcileRequest, ReconcileRun, RequestState, RunResult
from reconcilers.models.spans import Span

__all__ = [
    "ActionRecord",
    "Anomaly",
    "AnomalyCategory",
    "AppendOnlyError",
    "AppendOnlyModel",
    "Cluster",
    "HealingAction",
    "HealingRecord",
    "KubeEvent",
    "NotificationDelivery",
    "Outcome",
    "ReconcileRequest",
    "ReconcileRun",
    "RequestState",
    "Resource",
    "ResourceCount",
    "ResourceCountDelta",
    "RunCapture",
    "RunResult",
    "Span",
    "SpecRevision",
    "Transition",
    "TransitionCount",
    "TransitionCountDelta",
]
