"""The Events a run posts about its object, from what its record holds (the record, not the step's plan, is the
truth when they differ): one per recorded transition (`step.events_for`), the refusal of a change the state
machine does not allow (naming its anomaly), an escalation, and an out-of-band phase
(`provenance.out_of_band_event`)."""

from __future__ import annotations

from typing import Any

from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import provenance, step
from reconcilers.engine.step import EventSpec, Outcome


def recorded_events(reconciler: Reconciler, outcome: Outcome, record: Any) -> list[EventSpec]:
    """The Events of `record` (`recording.RecordOutcome`: transitions, anomaly_id, escalation, out_of_band_id) for
    the run that concluded `outcome`."""
    events = step.events_for(reconciler, record.transitions)
    if record.anomaly_id is not None and outcome.change is not None:
        events.append(step.refused_event(record.from_phase, outcome.change.to_phase, record.anomaly_id))
    if record.escalation is not None:
        events.append(EventSpec("Warning", record.escalation.reason, record.escalation.message))
    if outcome.out_of_band is not None and record.out_of_band_id is not None:
        events.append(provenance.out_of_band_event(outcome.out_of_band, record.out_of_band_id))
    return events
