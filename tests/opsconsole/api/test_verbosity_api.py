"""The verbosity endpoints: an operator turns one object verbose (and off), an admin a kind; refusals name the field
or the role; every change, refused ones included, is an ActionRecord; a verbose run's lines are readable within the
caller's namespaces."""

from __future__ import annotations

import pytest
from django.utils import timezone

from reconcilers.engine import verbosity
from reconcilers.models import ActionRecord, ReconcileRun, RunCapture
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def clean(queue):
    yield queue
    queue.redis.delete(verbosity.Store.of(queue).key)


def test_an_operator_turns_one_object_verbose_and_off_and_each_change_is_recorded(clean, as_user):
    res = f.resource("mc", "apps")
    operator = as_user("operator", ["apps"])
    answer = operator.post(f"/api/v1/resources/{res.pk}/verbosity", {"modules": "reconcile=debug,client=debug",
                                                                     "minutes": 15}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["scope"] == f"object:{res.key}" and answer.json()["setting"]["modules"]["client"] == "debug"
    listed = operator.get("/api/v1/verbosity").json()
    assert [s["scope"] for s in listed] == [f"object:{res.key}"]
    assert as_user("viewer", ["elsewhere"]).get("/api/v1/verbosity").json() == []
    bad = operator.post(f"/api/v1/resources/{res.pk}/verbosity", {"modules": "db=debug", "minutes": 5}, format="json")
    assert bad.status_code == 400 and "modules" in bad.json()["fields"]
    off = operator.post(f"/api/v1/resources/{res.pk}/verbosity", {"minutes": 0}, format="json")
    assert off.status_code == 200 and off.json()["cleared"] is True
    assert operator.get("/api/v1/verbosity").json() == []
    records = list(ActionRecord.objects.order_by("id").values_list("action", "status_code", "target"))
    assert records == [("verbosity.set", 200, f"object:{res.key}"), ("verbosity.set", 400, f"object:{res.key}"),
                       ("verbosity.clear", 200, f"object:{res.key}")]


def test_a_kind_needs_an_admin_and_a_viewer_changes_nothing(clean, as_user):
    res = f.resource("mc", "apps")
    body = {"scope": "kind:Memcached", "modules": "debug", "minutes": 10}
    assert as_user("operator").post("/api/v1/verbosity", body, format="json").status_code == 403
    assert as_user("viewer").post(f"/api/v1/resources/{res.pk}/verbosity", {"minutes": 5},
                                  format="json").status_code == 403
    assert as_user("admin").post("/api/v1/verbosity", body, format="json").status_code == 200
    assert as_user("admin").post("/api/v1/verbosity", {**body, "scope": "object:x"},
                                 format="json").status_code == 400
    assert list(ActionRecord.objects.order_by("id").values_list("status_code", flat=True)) == [403, 403, 200, 400]


def test_a_verbose_runs_lines_are_read_within_ones_namespaces(as_user):
    run = ReconcileRun.objects.create(key="cache.example.com/v1alpha1/memcacheds/apps/mc", kind="Memcached",
                                      started_at=timezone.now(), duration_seconds=0.1, result="success")
    RunCapture.objects.create(run=run, log_level="debug", log_lines=["a", "b"], log_lines_dropped=3)
    answer = as_user("viewer", ["apps"]).get(f"/api/v1/runs/{run.pk}/log")
    assert answer.status_code == 200 and answer.json() == {"run_id": run.pk, "level": "debug", "lines": ["a", "b"],
                                                           "dropped": 3}
    assert as_user("viewer", ["elsewhere"]).get(f"/api/v1/runs/{run.pk}/log").status_code == 404


def test_an_object_of_another_cluster_is_turned_verbose_by_its_own_key(clean, as_user):
    res = f.resource("mc", "apps", cluster="prod")
    assert res.key.startswith("prod/")
    answer = as_user("operator", ["apps"]).post(f"/api/v1/resources/{res.pk}/verbosity",
                                                {"modules": "reconcile=debug", "minutes": 5}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["scope"] == f"object:{res.key}"
    settings = verbosity.settings_read(verbosity.Store.of(clean))
    assert verbosity.levels_for(settings, res.key, "Memcached", None).modules["reconcile"] == "debug"
    assert ActionRecord.objects.get(action="verbosity.set").cluster == "prod"
