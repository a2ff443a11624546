"""The console's Debug logging: the panel on the detail page, an operator turns the object verbose (recorded) and
off, a viewer is refused, and a run's log page shows the lines it kept (or says it kept none)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from reconcilers.engine import verbosity
from reconcilers.models import ActionRecord, ReconcileRun, RunCapture
from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import csrf_post

pytestmark = pytest.mark.django_db


@pytest.fixture
def clean(queue):
    yield queue
    queue.redis.delete(verbosity.Store.of(queue).key)


def test_an_operator_turns_debug_logging_on_and_off_from_the_detail_page(clean, as_role):
    res = f.resource("mc", "apps")
    client = as_role("operator")
    page = client.get(f"/resources/{res.pk}/").content.decode()
    assert 'id="verbosity-form"' in page and "usual level" in page
    answer = csrf_post(client, f"/resources/{res.pk}/verbosity", {"modules": "reconcile=debug,client=debug",
                                                                  "minutes": "20"})
    assert answer.status_code == 302
    page = client.get(f"/resources/{res.pk}/").content.decode()
    assert f"object:{res.key}" in page and "reconcile=debug, client=debug, 20 more minutes" in page
    assert csrf_post(client, f"/resources/{res.pk}/verbosity", {"minutes": "0"}).status_code == 302
    assert "usual level" in client.get(f"/resources/{res.pk}/").content.decode()
    viewer = as_role("viewer")
    assert 'id="verbosity-form"' not in viewer.get(f"/resources/{res.pk}/").content.decode()
    assert csrf_post(viewer, f"/resources/{res.pk}/verbosity", {"minutes": "5"}).status_code == 403
    assert list(ActionRecord.objects.order_by("id").values_list("action", "outcome")) == [
        ("verbosity.set", "allowed"), ("verbosity.clear", "allowed"), ("verbosity.set", "refused")]


def test_a_runs_log_page_shows_its_lines(as_role):
    run = ReconcileRun.objects.create(key="cache.example.com/v1alpha1/memcacheds/apps/mc", kind="Memcached",
                                      started_at=timezone.now(), duration_seconds=0.1, result="success")
    quiet = ReconcileRun.objects.create(key=run.key, kind="Memcached", started_at=timezone.now(),
                                        duration_seconds=0.1, result="success")
    RunCapture.objects.create(run=run, log_level="debug", log_lines=["10:00:00.000 DEBUG x: <hello>"],
                              log_lines_dropped=2)
    page = as_role("viewer").get(f"/runs/{run.pk}/log/").content.decode()
    assert 'id="run-log-lines"' in page and "&lt;hello&gt;" in page and "2 more lines" in page
    assert 'id="run-log-none"' in as_role("viewer").get(f"/runs/{quiet.pk}/log/").content.decode()
    assert as_role("viewer", ["elsewhere"]).get(f"/runs/{run.pk}/log/").status_code == 404
