"""The console's "Preview change": the detail page offers the form to operators (its YAML the spec on record); a
replica change shows the spec diff, Running → Pending and the Deployment's replicas, nothing written; an invalid
spec shows admission's refusal; a viewer is refused; every attempt is in the audit log."""

from __future__ import annotations

import pytest

from reconcilers.models import ActionRecord
from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import csrf_post
from tests.reconcilers.whatif_support import running_memcached, versions

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def mirrored(kapi, namespace, builtin_kinds_only):
    _rec, live, phase = running_memcached(kapi, namespace)
    return f.resource("mc", namespace, uid=live["metadata"]["uid"], phase=phase, spec=live["spec"])


def test_an_operator_previews_a_change_from_the_detail_page(mirrored, as_role, kapi):
    client = as_role("operator")
    detail = client.get(f"/resources/{mirrored.pk}/").content.decode()
    assert 'id="whatif-form"' in detail and "size: 1" in detail
    before = versions(kapi, mirrored.namespace)
    response = csrf_post(client, f"/resources/{mirrored.pk}/whatif", {"spec_yaml": "size: 3\nimage: memcached:1.6\n"})
    html = response.content.decode()
    assert response.status_code == 200, html
    assert 'id="whatif-spec"' in html and "<code>spec.size</code>" in html
    assert "Pending" in html and "Deployment mc: update" in html and "<code>spec.replicas</code>" in html
    assert versions(kapi, mirrored.namespace) == before
    refused = csrf_post(client, f"/resources/{mirrored.pk}/whatif", {"spec_yaml": "size: -1\n"}).content.decode()
    assert 'id="whatif-refused"' in refused and "spec.size" in refused
    assert list(ActionRecord.objects.filter(action="resource.whatif").values_list("outcome", flat=True)) == [
        "allowed", "allowed"]


def test_a_viewer_gets_no_form_and_is_refused_and_recorded(mirrored, as_role):
    client = as_role("viewer")
    assert 'id="whatif-form"' not in client.get(f"/resources/{mirrored.pk}/").content.decode()
    response = csrf_post(client, f"/resources/{mirrored.pk}/whatif", {"spec_yaml": "size: 3\n"})
    assert response.status_code == 403
    assert ActionRecord.objects.get(action="resource.whatif").outcome == "refused"
