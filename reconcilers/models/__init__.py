"""The engine's tables: the Resource mirror, the audit trail and runs, manual requests, spans.

`Transition`, `SpecRevision`, `HealingRecord`, `KubeEvent` and `ReconcileRun` are append-only (see
`reconcilers.models.base`).
"""

from reconcilers.models.audit import Anomaly, AnomalyCategory, SpecRevision, Transition
from reconcilers.models.base import AppendOnlyError, AppendOnlyModel
from reconcilers.models.healing import HealingAction, HealingRecord, KubeEvent, NotificationDelivery
from reconcilers.models.resource import Resource
from reconcilers.models.runs import ReconcileRequest, ReconcileRun, RequestState, RunResult
from reconcilers.models.spans import Span

__all__ = [
    "Anomaly",
    "AnomalyCategory",
    "AppendOnlyError",
    "AppendOnlyModel",
    "HealingAction",
    "HealingRecord",
    "KubeEvent",
    "NotificationDelivery",
    "ReconcileRequest",
    "ReconcileRun",
    "RequestState",
    "Resource",
    "RunResult",
    "Span",
    "SpecRevision",
    "Transition",
]
