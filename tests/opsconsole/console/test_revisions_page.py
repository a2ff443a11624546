"""The detail page's spec revisions: who changed what per generation, and a diff between any two."""

from __future__ import annotations

from tests.opsconsole.api import factories as f
from tests.opsconsole.api.test_revisions import revise


def test_the_detail_page_lists_revisions_and_diffs_two_generations(as_role):
    res = f.resource("revs", spec={"size": 5, "image": "m:2"})
    revise(res, 1, {"size": 1}, "kubectl-client-side-apply", "2030-01-01T00:00:00Z")
    revise(res, 2, {"size": 3}, "kubectl-edit", "2030-01-01T00:01:00Z")
    revise(res, 3, {"size": 5, "image": "m:2"}, "argocd-controller", "2030-01-01T00:02:00Z")
    client = as_role("viewer")
    html = client.get(f"/resources/{res.pk}/").content.decode()
    assert 'id="revisions-table"' in html and 'data-generation="3"' in html
    assert "manager:kubectl-edit" in html and "manager:argocd-controller" in html
    assert "Generation 2 → 3" in html and "spec/image" in html  # the newest against the one before by default
    html = client.get(f"/resources/{res.pk}/?from=1&to=3").content.decode()
    assert "Generation 1 → 3" in html
    assert '<pre class="yaml">1</pre>' in html and '<pre class="yaml">5</pre>' in html
    html = client.get(f"/resources/{res.pk}/?from=1&to=7").content.decode()
    assert "Pick two generations that have revisions" in html
    fragment = client.get(f"/resources/{res.pk}/?_live=revisions").content.decode()
    assert "revisions-table" in fragment


def test_no_revisions_yet_says_so(as_role):
    res = f.resource("none")
    assert "No spec revisions yet" in as_role("viewer").get(f"/resources/{res.pk}/").content.decode()


def test_the_detail_page_lists_out_of_band_status_changes_with_their_manager(as_role):
    from reconcilers.models import Anomaly, AnomalyCategory

    res = f.resource("forged", phase="Running")
    Anomaly.objects.create(resource=res, from_phase="Running", to_phase="Failed", reason="Forged", message="planted",
                           actor="manager:kubectl-patch", category=AnomalyCategory.OUT_OF_BAND)
    html = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    assert 'id="out-of-band"' in html and "manager:kubectl-patch" in html and "Forged" in html
