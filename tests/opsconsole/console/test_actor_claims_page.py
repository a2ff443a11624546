"""Issue 37 in the console: the resource page shows a field manager's name as a claim ("claim" badge, "field
manager (unverified)"), never as an identity, in its revisions and out-of-band changes."""

from __future__ import annotations

from reconcilers.models import Anomaly, AnomalyCategory
from tests.opsconsole.api import factories as f
from tests.opsconsole.api.test_revisions import revise


def test_the_resource_page_shows_a_field_manager_as_a_claim(as_role):
    res = f.resource("shown", phase="")
    f.transition(res, "Pending")
    revise(res, 1, {"size": 1}, "opsconsole-rollback", "2030-01-01T00:00:00Z")
    res.save()
    Anomaly.objects.create(resource=res, from_phase="Pending", to_phase="Failed", reason="Forged",
                           actor="manager:opsconsole-controller", category=AnomalyCategory.OUT_OF_BAND)
    html = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    assert html.count("field manager (unverified)") >= 2  # the revision and the out-of-band change
    assert 'actor-claim' in html and "manager:opsconsole-rollback" in html
    assert 'title="field manager (unverified)' in html
