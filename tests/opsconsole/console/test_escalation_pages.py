"""Escalation on the Healing panel: an anomaly that needs a person shows its forms to operators only; acknowledge,
assign and resolve through the forms are recorded (healing record and action record); a resolve without a note
and a viewer's forged POST are refused, shown and recorded; each record's deliveries are listed; and, in Debian's
Chromium, an operator acknowledges and resolves from the page."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import expect

from reconcilers.engine.healing import rollback
from reconcilers.models import ActionRecord, HealingAction, HealingRecord, NotificationDelivery, Resource
from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import csrf_post, signed_in


def _anomalous(name: str = "stuck-one") -> Resource:
    res = f.resource(name, "default", phase="Pending")
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(pk=res.pk)
        rollback.anomaly_raise_locked(row, "stuck", "Pending for 20 minutes", timezone.now())
        row.save()
    return row


def _last() -> ActionRecord:
    return ActionRecord.objects.order_by("-id").first()


def test_the_forms_acknowledge_assign_and_resolve_and_refusals_are_recorded(as_role, settings):
    settings.OPSCONSOLE_NOTIFICATIONS = [{"name": "pager", "url": "https://pager.example/hook", "format": "json"}]
    res = _anomalous()
    viewer, operator = as_role("viewer"), as_role("operator")
    html = viewer.get(f"/resources/{res.pk}/").content.decode()
    assert "needs a person" in html and "not acknowledged" in html and 'id="ack-form-stuck"' not in html
    assert 'data-receiver="pager" data-state="pending"' in html  # the anomaly.detected record's delivery
    html = operator.get(f"/resources/{res.pk}/").content.decode()
    assert 'id="ack-form-stuck"' in html and 'id="resolve-form-stuck"' in html
    assert f'<option value="{operator.user.username}"' in html  # an assignee who can see the namespace

    response = csrf_post(viewer, f"/resources/{res.pk}/anomalies/stuck/acknowledge", {"note": "mine"})
    assert response.status_code == 403
    assert (_last().action, _last().status_code, _last().outcome) == ("anomaly.acknowledge", 403, "refused")

    response = csrf_post(operator, f"/resources/{res.pk}/anomalies/stuck/acknowledge", {"note": "looking"})
    assert response.status_code == 302 and response["Location"].endswith(f"/resources/{res.pk}/#healing")
    response = csrf_post(operator, f"/resources/{res.pk}/anomalies/stuck/assign",
                         {"assignee": operator.user.username})
    assert response.status_code == 302
    html = operator.get(f"/resources/{res.pk}/").content.decode()
    assert "acknowledged by" in html and "looking" in html and "assigned to" in html

    response = csrf_post(operator, f"/resources/{res.pk}/anomalies/stuck/resolve", {"note": ""})
    assert response.status_code == 400 and "note" in response.content.decode()
    assert (_last().action, _last().status_code) == ("anomaly.resolve", 400)
    response = csrf_post(operator, f"/resources/{res.pk}/anomalies/stuck/resolve", {"note": "raised the timeout"})
    assert response.status_code == 302
    res.refresh_from_db()
    assert res.active_anomalies == {} and res.anomalies_resolved["stuck"]["by"] == f"user:{operator.user.username}"
    assert list(HealingRecord.objects.filter(resource=res).order_by("seq").values_list("action", flat=True)) == [
        HealingAction.ANOMALY_DETECTED, HealingAction.ANOMALY_ACKNOWLEDGED, HealingAction.ANOMALY_ASSIGNED,
        HealingAction.ANOMALY_RESOLVED]
    assert (_last().action, _last().status_code, _last().reason) == ("anomaly.resolve", 202, "raised the timeout")
    assert NotificationDelivery.objects.count() == 1


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_operator_acknowledges_and_resolves_from_the_page(chromium, live_server, queue):
    res = _anomalous("stuck-browser")
    user = f.user("esc-op", "operator")
    context, page, errors = signed_in(chromium, live_server.url, user, width=1366, height=900)
    try:
        page.goto(f"{live_server.url}/resources/{res.pk}/")
        expect(page.locator(".escalation[data-rule=stuck]")).to_contain_text("not acknowledged")
        page.fill("#ack-note-stuck", "on it")
        page.click("#ack-submit-stuck")
        expect(page.locator(".anomaly-acknowledged")).to_contain_text("on it")
        page.fill("#resolve-note-stuck", "fixed the spec")
        page.click("#resolve-submit-stuck")
        expect(page.locator(".escalation")).to_have_count(0)
        rows = page.locator("#healing-records tr.healing-record")
        expect(rows.nth(0)).to_contain_text("anomaly.resolved")
        expect(rows.nth(0)).to_contain_text("fixed the spec")
        assert errors == []
    finally:
        context.close()
