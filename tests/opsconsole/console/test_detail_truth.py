"""Issue 38, "the console tells the truth about it": a condition's status is coloured by its polarity as kstatus
reads it (Stalled=False and Reconciling=False good, AnomalyDetected=True bad), and a deleted object's page offers
no action forms (Reconcile, Suspend, Roll back, Pin) and refreshes nothing live (no "live" badge)."""

from __future__ import annotations

import re

from django.db import transaction
from django.utils import timezone

from reconcilers.engine.audit import revision_fields, revision_hash
from reconcilers.models import Resource, SpecRevision
from tests.opsconsole.api import factories as f

CONDITIONS = [
    {"type": "Ready", "status": "True", "reason": "Running", "message": ""},
    {"type": "Stalled", "status": "False", "reason": "Running", "message": ""},
    {"type": "Reconciling", "status": "False", "reason": "Running", "message": ""},
    {"type": "AnomalyDetected", "status": "True", "reason": "Backoff", "message": "3 events"},
    {"type": "Available", "status": "False", "reason": "NoPods", "message": ""},
]
FORMS = ("reconcile-form", "suspend-form", "resume-form", "rollback-form", "pin-form", "unpin-form")


def _revision(res: Resource, generation: int) -> None:
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(pk=res.pk)
        rev = SpecRevision(resource=row, resource_uid=row.uid, kind=row.kind, namespace=row.namespace, name=row.name,
                           seq=row.last_revision_seq + 1, chain_after=row.last_transition_seq, generation=generation,
                           spec={"size": generation}, created_at=timezone.now(), prev_hash=row.last_transition_hash)
        rev.hash = revision_hash(revision_fields(rev), rev.prev_hash)
        rev.save(force_insert=True)
        row.last_revision_seq, row.last_transition_hash = rev.seq, rev.hash
        row.save()


def _tones(html: str) -> dict[str, str]:
    return dict((m[1], m[0]) for m in re.findall(r'class="badge badge-(\w+) condition-status" data-condition="(\w+)"',
                                                  html))


def test_conditions_are_coloured_by_polarity_as_kstatus_reads_them(as_role, db):
    res = f.resource("polar", "default", conditions=CONDITIONS)
    html = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    assert _tones(html) == {"Ready": "ok", "Stalled": "ok", "Reconciling": "ok", "AnomalyDetected": "bad",
                            "Available": "bad"}
    assert '<span class="sr-only"> (good)</span>' in html and '<span class="sr-only"> (bad)</span>' in html
    live = as_role("viewer").get(f"/resources/{res.pk}/", {"_live": "head"}).json()["fragments"]["head"]
    assert _tones(live)["Stalled"] == "ok" and _tones(live)["AnomalyDetected"] == "bad"


def test_reconciling_true_is_in_progress_and_stalled_true_is_bad(as_role, db):
    res = f.resource("busy", "default", conditions=[{"type": "Reconciling", "status": "True", "reason": "Pending"},
                                                    {"type": "Stalled", "status": "True", "reason": "Failed"}])
    html = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    assert _tones(html) == {"Reconciling": "wait", "Stalled": "bad"}


def test_a_live_objects_page_has_its_forms_and_live_fragments(as_role, db):
    res = f.resource("alive", "default", generation=2, active_anomalies={"backoff": {"since": None}})
    _revision(res, 1)
    _revision(res, 2)
    html = as_role("operator").get(f"/resources/{res.pk}/").content.decode()
    for form in ("reconcile-form", "suspend-form", "rollback-form", "pin-form"):
        assert f'id="{form}"' in html, form
    assert "Roll back to this" in html and "data-live=" in html and "badge-anomaly" in html


def test_a_deleted_objects_page_has_no_action_forms_and_no_live_badges(as_role, db):
    res = f.resource("gone", "default", phase="Deleted", deleted=True, deleted_at=timezone.now(), generation=2,
                     suspended=True, suspension={"actor": "user:ann", "reason": "upgrade"},
                     active_anomalies={"backoff": {"since": None}}, rollback={"state": "in_progress"})
    _revision(res, 1)
    _revision(res, 2)
    operator = as_role("operator")
    html = operator.get(f"/resources/{res.pk}/").content.decode()
    assert "<dt>Deleted</dt>" in html
    for form in FORMS:
        assert f'id="{form}"' not in html, form
    assert "Roll back to this" not in html and "/rollback" not in html and "/suspend" not in html
    assert "/reconcile" not in html and "/pin" not in html
    assert "data-live=" not in html  # nothing refreshes, so console.js shows no "live" badge
    assert "badge-suspended" not in html and "badge-anomaly" not in html and ">rolling back<" not in html
    assert 'id="reconcile-deleted"' in html and 'id="healing-deleted"' in html
    for name in ("healing", "revisions", "head"):  # the fragments, asked for anyway, offer nothing either
        fragment = operator.get(f"/resources/{res.pk}/", {"_live": name}).json()["fragments"][name]
        assert not any(f'id="{form}"' in fragment for form in FORMS) and "Roll back to this" not in fragment
