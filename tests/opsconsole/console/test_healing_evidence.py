"""Issue 38: the Healing panel and `GET /api/v1/resources/{id}/healing` tell what each active anomaly is about —
the generation, whether it may roll back and why not, and its evidence (the counted Events: reason, involved
object, occurrences, times; metric samples) — read from the active entry and the `anomaly.detected` record that
raised it; an older row without those fields says they are not on record instead of failing or guessing."""

from __future__ import annotations

import html as htmllib
import re
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from reconcilers.engine.healing.records import healing_append
from reconcilers.models import HealingAction, Resource
from tests.opsconsole.api import factories as f

WHY_NOT = "generation 2 reached Running before: a runtime failure, not a bad change"


def _raise(res: Resource, rule: str, active: dict, detail: dict) -> Resource:
    """Record `anomaly.detected` for `rule` with `detail` and make it active with `active` (+ the record's seq)."""
    with transaction.atomic():
        locked = Resource.objects.select_for_update().get(pk=res.pk)
        record = healing_append(locked, HealingAction.ANOMALY_DETECTED, actor="controller", rule=rule,
                                reason=f"rule {rule} matched", message="4 events (BackOff/Failed) in 300s",
                                detail=detail)
        locked.active_anomalies = {**(locked.active_anomalies or {}), rule: {**active, "record": record.seq}}
        locked.save(update_fields=["active_anomalies", "last_healing_seq", "last_transition_hash"])
    return locked


def _sick(now) -> Resource:
    res = f.resource("sick", "default", generation=3, observed_generation=3)
    first, last = now - timedelta(seconds=90), now - timedelta(seconds=20)
    events = [
        {"type": "Warning", "reason": "BackOff", "involved_kind": "Pod", "involved_name": "sick-7c9f-abcde",
         "occurrences": 3, "count": 41, "first_timestamp": first.isoformat(), "last_timestamp": last.isoformat(),
         "generation": 2, "message": "Back-off pulling image \"memcached:1.6-broken\""},
        {"type": "Warning", "reason": "Failed", "involved_kind": "Pod", "involved_name": "sick-7c9f-fghij",
         "count": 2, "last_timestamp": last.isoformat()},  # an older row: the Event's own count only
    ]
    res = _raise(res, "backoff",
                 {"since": now.isoformat(), "message": "4 events (BackOff/Failed) in 300s", "generation": 2,
                  "rollback_ok": False, "why_not": WHY_NOT},
                 {"generation": 2, "occurrences": 4, "window_seconds": 300, "events": events})
    return _raise(res, "latency", {"since": now.isoformat(), "message": "p99 above 0.5 s", "generation": 3,
                                   "rollback_ok": True},
                  {"generation": 3, "metric": "histogram_quantile(0.99, memcached_latency)",
                   "samples": [[now.timestamp() - 30, 0.71], {"at": now.isoformat(), "value": 0.83}]})


def test_the_panel_shows_each_anomalys_generation_rollback_verdict_and_counted_evidence(as_role, db):
    now = timezone.now()
    res = _sick(now)
    page = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    anomalies = re.search(r'<dd id="healing-anomalies">(.*?)</dd>', page, re.S).group(1)
    backoff = re.search(r'data-rule="backoff">(.*?)</details>', anomalies, re.S).group(1)
    assert "about generation <strong>2</strong>" in backoff
    assert "no rollback" in backoff and htmllib.escape(WHY_NOT) in backoff
    assert "occurrences 4" in backoff and "window_seconds 300" in backoff and "2 Events" in backoff
    rows = re.findall(r'<tr class="anomaly-event">(.*?)</tr>', backoff, re.S)
    assert len(rows) == 2
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", rows[0], re.S)]
    assert cells[0] == "Warning BackOff" and cells[1] == "Pod/sick-7c9f-abcde" and cells[2] == "3"
    assert cells[3].endswith("ago") and cells[4].endswith("ago") and cells[5] == "2"
    assert "Back-off pulling image" in backoff
    old = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", rows[1], re.S)]
    assert old[1] == "Pod/sick-7c9f-fghij" and old[2] == "2 (count)" and old[3] == "—" and old[5] == "—"
    latency = re.search(r'data-rule="latency">(.*?)</details>', anomalies, re.S).group(1)
    assert "about generation <strong>3</strong>" in latency and "may roll back" in latency
    assert "histogram_quantile(0.99, memcached_latency)" in latency
    assert "<strong>0.71</strong>" in latency and "<strong>0.83</strong>" in latency
    live = as_role("viewer").get(f"/resources/{res.pk}/", {"_live": "healing"}).json()["fragments"]["healing"]
    assert "about generation <strong>2</strong>" in live and "Pod/sick-7c9f-abcde" in live


def test_the_api_passes_the_generation_verdict_and_evidence_through(as_role, db):
    now = timezone.now()
    res = _sick(now)
    summary = as_role("viewer").get(f"/api/v1/resources/{res.pk}/healing").json()
    by_rule = {a["rule"]: a for a in summary["anomalies"]}
    backoff = by_rule["backoff"]
    assert (backoff["generation"], backoff["rollback_ok"], backoff["why_not"]) == (2, False, WHY_NOT)
    assert backoff["evidence"]["figures"] == {"occurrences": 4, "window_seconds": 300}
    first = backoff["evidence"]["events"][0]
    assert (first["reason"], first["involved"], first["occurrences"], first["generation"]) == (
        "BackOff", "Pod/sick-7c9f-abcde", 3, 2)
    assert first["first_timestamp"] and first["last_timestamp"]
    assert backoff["record"] == 1 and backoff["recorded_at_generation"] == 3
    latency = by_rule["latency"]
    assert latency["rollback_ok"] is True and [s["value"] for s in latency["evidence"]["samples"]] == [0.71, 0.83]
    assert latency["evidence"]["samples"][0]["at"].endswith("+00:00")


def test_an_older_row_without_generation_or_evidence_says_so(as_role, db):
    """Rows recorded before anomalies carried their generation: neither the active entry nor the record has it,
    and an entry may even name no record."""
    res = f.resource("old", "default", generation=5, active_anomalies={
        "crash_loop": {"since": "2026-01-01T00:00:00+00:00", "message": "7 restarts in 5 minutes"}})
    page = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    anomalies = re.search(r'<dd id="healing-anomalies">(.*?)</dd>', page, re.S).group(1)
    assert "7 restarts in 5 minutes" in anomalies and "generation not on record" in anomalies
    assert "rollback verdict not on record" in anomalies and "no evidence on record" in anomalies
    summary = as_role("viewer").get(f"/api/v1/resources/{res.pk}/healing").json()
    (entry,) = summary["anomalies"]
    assert (entry["rule"], entry["generation"], entry["rollback_ok"], entry["why_not"]) == ("crash_loop", None,
                                                                                             None, "")
    assert entry["evidence"] == {"figures": {}, "events": [], "samples": [], "metric": ""}
    # an older anomaly.detected record (no generation in its detail, events with the Event's count only)
    res = _raise(res, "backoff", {"since": timezone.now().isoformat(), "message": "3 events"},
                 {"occurrences": 3, "window_seconds": 300,
                  "events": [{"involved_kind": "Pod", "involved_name": "old-1", "reason": "BackOff", "count": 3,
                              "last_timestamp": timezone.now().isoformat()}]})
    page = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    backoff = re.search(r'data-rule="backoff">(.*?)</details>', page, re.S).group(1)
    assert "generation not on record (recorded while at generation 5)" in backoff
    assert "Pod/old-1" in backoff and "3 <span" in backoff
