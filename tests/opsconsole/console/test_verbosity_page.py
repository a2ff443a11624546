"""The console's Debug logging: the panel on the detail page, an operator turns the object verbose (recorded) and
off, a viewer is refused, and a run's log page shows the lines it kept (or says it kept none)."""

from __future__ import annotations

import time

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


def test_a_verbose_run_is_linked_from_its_page_and_marked_in_the_runs_table(as_role):
    res = f.resource("mc", "apps")
    loud = ReconcileRun.objects.create(key=res.key, kind=res.kind, resource=res, started_at=timezone.now(),
                                       duration_seconds=0.1, result="success")
    quiet = ReconcileRun.objects.create(key=res.key, kind=res.kind, resource=res, started_at=timezone.now(),
                                        duration_seconds=0.1, result="error", error_class="Boom")
    RunCapture.objects.create(run=loud, log_level="debug", log_lines=["a", "b"], log_lines_dropped=1)
    viewer = as_role("viewer")
    page = viewer.get(f"/runs/{loud.pk}/").content.decode()
    assert f'href="/runs/{loud.pk}/log/" class="log-link">2 lines kept at debug</a>' in page
    assert "1 more counted, not kept" in page
    page = viewer.get(f"/runs/{quiet.pk}/").content.decode()
    assert "not a verbose run" in page and f"/runs/{quiet.pk}/log/" not in page
    runs = viewer.get(f"/resources/{res.pk}/").content.decode()
    assert f'class="badge badge-wait verbose-run" href="/runs/{loud.pk}/log/"' in runs
    assert f"/runs/{quiet.pk}/log/" not in runs


def test_an_admin_sets_a_kinds_verbosity_from_the_console_and_others_are_refused(clean, as_role):
    admin = as_role("admin")
    page = admin.get("/verbosity/").content.decode()
    assert 'id="verbosity-scope-form"' in page and 'value="kind:Memcached"' in page and 'id="verbosity-none"' in page
    answer = csrf_post(admin, "/verbosity/set", {"scope": "kind:Memcached", "modules": "reconcile=debug",
                                                 "minutes": "30"})
    assert answer.status_code == 302 and answer["Location"] == "/verbosity/"
    in_force = verbosity.settings_read(verbosity.Store.of(clean))
    assert in_force["kind:Memcached"].modules == {"reconcile": "debug"}
    assert in_force["kind:Memcached"].actor == f"user:{admin.user.get_username()}"
    operator = as_role("operator")
    page = operator.get("/verbosity/").content.decode()
    assert 'data-scope="kind:Memcached"' in page and 'id="verbosity-scope-form"' not in page
    assert csrf_post(operator, "/verbosity/set", {"scope": "all", "minutes": "5"}).status_code == 403
    refused = csrf_post(admin, "/verbosity/set", {"scope": "kind:Memcached", "modules": "db=debug", "minutes": "5"})
    assert refused.status_code == 400 and "modules" in refused.content.decode()
    assert csrf_post(admin, "/verbosity/set", {"scope": "object:x", "minutes": "5"}).status_code == 400
    assert csrf_post(admin, "/verbosity/set", {"scope": "kind:Memcached", "minutes": "0"}).status_code == 302
    assert "kind:Memcached" not in verbosity.settings_read(verbosity.Store.of(clean))
    records = list(ActionRecord.objects.order_by("id").values_list("action", "outcome", "target", "actor"))
    assert [r[:3] for r in records] == [
        ("verbosity.set", "allowed", "kind:Memcached"), ("verbosity.set", "refused", "all"),
        ("verbosity.set", "rejected", "kind:Memcached"), ("verbosity.set", "rejected", "object:x"),
        ("verbosity.clear", "allowed", "kind:Memcached")]
    assert records[1][3] == operator.user.get_username()


def test_object_settings_outside_the_viewers_namespaces_are_not_listed(clean, as_role):
    verbosity.setting_store(verbosity.Store.of(clean), verbosity.Setting(
        "object:cache.example.com/v1alpha1/memcacheds/secret/mc", {"reconcile": "debug"}, time.time() + 60))
    assert "secret/mc" in as_role("viewer").get("/verbosity/").content.decode()
    assert "secret/mc" not in as_role("viewer", ["apps"]).get("/verbosity/").content.decode()
