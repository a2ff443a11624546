"""`manage.py whatif KEY -f spec.yaml` against kubesim: the preview printed (the spec diff, the phase, the
Deployment's diff), nothing written, an ActionRecord per attempt; an invalid spec exits non-zero with admission's
causes, an unknown key too."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from reconcilers.models import ActionRecord
from tests.opsconsole.api import factories as f
from tests.reconcilers.whatif_support import running_memcached, versions

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def mirrored(kapi, namespace, builtin_kinds_only):
    _rec, live, phase = running_memcached(kapi, namespace)
    return f.resource("mc", namespace, uid=live["metadata"]["uid"], phase=phase, spec=live["spec"])


def test_whatif_prints_the_preview_and_writes_nothing(mirrored, kapi, tmp_path):
    spec = tmp_path / "mc.yaml"
    spec.write_text("apiVersion: cache.example.com/v1alpha1\nkind: Memcached\n"
                    "spec:\n  size: 4\n  image: memcached:1.6\n")
    before = versions(kapi, mirrored.namespace)
    out = io.StringIO()
    call_command("whatif", mirrored.key, "-f", str(spec), "--as", "ann", stdout=out)
    text = out.getvalue()
    assert "spec.size: 1 -> 4" in text and "phase       Running -> Pending" in text
    assert "child       Deployment" in text and "spec.replicas: 1 -> 4" in text
    assert versions(kapi, mirrored.namespace) == before
    record = ActionRecord.objects.order_by("-id").first()
    assert (record.action, record.outcome, record.auth, record.actor, record.target) == (
        "resource.whatif", "allowed", "command", "ann", mirrored.key)


def test_an_invalid_spec_and_an_unknown_key_exit_non_zero(mirrored, kapi, tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("size: 1000\n")
    out = io.StringIO()
    with pytest.raises(CommandError, match="refused"):
        call_command("whatif", f"Memcached {mirrored.namespace}/mc", "-f", str(spec), stdout=out)
    assert "refused     by validation/admission" in out.getvalue() and "spec.size" in out.getvalue()
    with pytest.raises(CommandError, match="no object"):
        call_command("whatif", "cache.example.com/v1alpha1/memcacheds/none/none", "-f", str(spec))
    assert list(ActionRecord.objects.order_by("id").values_list("status_code", flat=True)) == [200, 404]
