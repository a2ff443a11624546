"""Self-healing in the console's HTML: the anomaly and suspended badges on the resources list and the overview's
counts (set on the rows directly), the detail page's Healing panel (anomalies, the suspended banner, the records,
the forms for operators only), the forms against kubesim (suspend / resume, roll back from the revisions panel)
and their refusals, shown and recorded like "Reconcile now"'s."""

from __future__ import annotations

import re

import pytest

from reconcilers.engine.healing.suspend import SUSPENDED
from reconcilers.models import ActionRecord, HealingRecord
from tests.opsconsole.api import factories as f
from tests.opsconsole.api.test_healing_api import Cluster
from tests.opsconsole.console.conftest import csrf_post

ANOMALY = {"crash_loop": {"since": "2026-01-01T00:00:00+00:00", "message": "7 restarts in 5 minutes"}}


def test_the_resources_list_and_the_overview_show_anomalies_and_suspensions_in_text(as_role, db):
    f.resource("sick", "default", active_anomalies=ANOMALY)
    f.resource("paused", "default", suspended=True, suspension={"actor": "user:ann", "reason": "upgrade"})
    f.resource("fine", "default")
    client = as_role("viewer")
    html = client.get("/resources/").content.decode()
    rows = {m[0]: m[1] for m in re.findall(r'class="res-name">(\w+)</a>(.*?)</tr>', html, re.S)}
    assert re.search(r'badge-anomaly[^>]*>anomaly: crash_loop<', rows["sick"])
    assert re.search(r'badge-suspended[^>]*>suspended<', rows["paused"])
    assert "badge-anomaly" not in rows["fine"] and "badge-suspended" not in rows["fine"]
    overview = client.get("/").content.decode()
    assert '<span class="healing-anomalous">1</span>' in overview
    assert '<span class="healing-suspended">1</span>' in overview
    assert re.search(r"<code>crash_loop</code></td><td>1</td>", overview)


def test_the_detail_page_shows_anomalies_the_banner_and_records_and_hides_forms_from_viewers(as_role, db):
    res = f.resource("paused", "default", active_anomalies=ANOMALY, suspended=True,
                     suspension={"actor": "user:ann", "reason": "upgrade in progress", "until": None})
    html = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    assert 'id="suspended-banner"' in html and "upgrade in progress" in html and "user:ann" in html
    assert "crash_loop" in html and "7 restarts in 5 minutes" in html
    assert 'id="resume-form"' not in html and 'id="suspend-form"' not in html
    assert 'id="resume-form"' in as_role("operator").get(f"/resources/{res.pk}/").content.decode()
    live = as_role("viewer").get(f"/resources/{res.pk}/", {"_live": "healing"}).json()["fragments"]["healing"]
    assert 'id="suspended-banner"' in live and "crash_loop" in live  # the panel refreshes with the page


@pytest.mark.django_db(transaction=True)
def test_suspend_and_resume_through_the_forms_and_a_refusal_is_shown_and_recorded(as_role, kapi, queue,
                                                                                    reconcilers):
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    cluster = Cluster(kapi)
    res = cluster.gadget(cluster.inside, "g1", generations=2)
    operator = as_role("operator")
    page = operator.get(f"/resources/{res.pk}/").content.decode()
    assert "Roll back to this" in page and 'id="rollback-form"' in page
    response = csrf_post(operator, f"/resources/{res.pk}/suspend", {"reason": "db upgrade", "duration": "900"})
    assert response.status_code == 302 and response["Location"].endswith(f"/resources/{res.pk}/#healing")
    assert cluster.live(res)["metadata"]["annotations"][SUSPENDED] == "db upgrade"
    html = operator.get(f"/resources/{res.pk}/").content.decode()
    assert 'id="suspended-banner"' in html and "db upgrade" in html
    # a duration the form does not offer is refused, shown and recorded
    refused = csrf_post(operator, f"/resources/{res.pk}/suspend", {"reason": "x", "duration": "7"})
    assert refused.status_code == 400 and "duration" in refused.content.decode()
    assert (ActionRecord.objects.order_by("-id").first().outcome,
            ActionRecord.objects.order_by("-id").first().action) == ("rejected", "resource.suspend")
    assert csrf_post(operator, f"/resources/{res.pk}/resume", {"reason": "done"}).status_code == 302
    assert SUSPENDED not in (cluster.live(res)["metadata"].get("annotations") or {})
    assert csrf_post(operator, f"/resources/{res.pk}/rollback", {"reason": "bad size", "generation": "1"}
                     ).status_code == 302
    assert cluster.live(res)["spec"]["size"] == 1
    assert list(HealingRecord.objects.filter(resource=res).order_by("seq").values_list("action", flat=True)) == [
        "suspended", "resumed", "rollback.started", "rollback.applied"]
    viewer = as_role("viewer")
    forged = csrf_post(viewer, f"/resources/{res.pk}/suspend", {"reason": "x", "duration": ""})
    assert forged.status_code == 403
    record = ActionRecord.objects.order_by("-id").first()
    assert (record.action, record.outcome, record.actor) == ("resource.suspend", "refused", viewer.user.username)
