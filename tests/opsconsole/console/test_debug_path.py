"""Issue 42, per-object debug from end to end: an operator turns debug logging on for one object in the console →
a real run of it (runner.run against kubesim, the database and Redis) keeps its debug lines → the console shows
them (the run's page links its log, the runs table marks it, the log page has the lines) → past the expiry (the
clock moved, nothing cleared, no restart) the next run of the same object keeps none."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from reconcilers.engine import kube, runner, verbosity
from reconcilers.models import ReconcileRun, Resource, RunCapture
from tests.opsconsole.console.conftest import csrf_post
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_debug_turned_on_in_the_console_is_kept_with_a_real_run_and_switches_off_at_expiry(
        as_role, kapi, namespace, workqueue, reconcilers, monkeypatch, request):
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    request.addfinalizer(lambda: workqueue.redis.delete(verbosity.Store.of(workqueue).key))
    kube.create_object(kapi, GADGET, gadget(namespace, "dbg", mode="pending", requeueAfter=600))
    key = GADGET.request(namespace, "dbg").key()

    def run(mode: str = "") -> ReconcileRun:
        if mode:  # a new generation: the run writes the status (a request the client module logs)
            kube.patch_object(kapi, GADGET, namespace, "dbg", {"spec": {"mode": mode}})
        workqueue.add(key)
        runner.run(key)
        return ReconcileRun.objects.filter(key=key).latest("id")

    def kept_lines(one: ReconcileRun) -> list[str]:
        """The log lines kept with a run (a kept run may keep inputs, sampled or slow: only lines matter here)."""
        capture = RunCapture.objects.filter(run_id=one.pk).first()
        return list(capture.log_lines) if capture is not None and capture.log_level else []

    first = run()  # the object's first run records it: the console's page of it
    assert kept_lines(first) == []
    resource = Resource.objects.get(key=key)
    operator = as_role("operator", [namespace])
    answer = csrf_post(operator, f"/resources/{resource.pk}/verbosity",
                       {"modules": "reconcile=debug,client=debug", "minutes": "1"})
    assert answer.status_code == 302
    verbosity.CACHE.forget()  # a worker reads the settings at most every few seconds: this one at once

    loud = run("ok")
    log_page = operator.get(f"/runs/{loud.pk}/log/").content.decode()
    assert 'id="run-log-lines"' in log_page and "Logged at debug" in log_page
    assert f"set by user:{operator.user.get_username()}" in log_page
    lines = kept_lines(loud)
    status_write = f"/apis/{GADGET.group}/{GADGET.version}/namespaces/{namespace}/gadgets/dbg/status"
    assert any(" DEBUG " in line and status_write in line for line in lines), lines  # client=debug
    assert status_write in log_page
    assert f'href="/runs/{loud.pk}/log/" class="log-link">' in operator.get(f"/runs/{loud.pk}/").content.decode()
    runs_table = operator.get(f"/resources/{resource.pk}/").content.decode()
    assert f'verbose-run" href="/runs/{loud.pk}/log/"' in runs_table
    assert f'verbose-run" href="/runs/{first.pk}/log/"' not in runs_table

    # two minutes on: the one-minute setting has expired by itself (still in Redis, never cleared)
    later = time.time() + 120
    monkeypatch.setattr(verbosity, "time", SimpleNamespace(time=lambda: later, monotonic=time.monotonic,
                                                           strftime=time.strftime, gmtime=time.gmtime))
    verbosity.CACHE.forget()
    quiet = run("pending")
    assert quiet.pk != loud.pk
    assert kept_lines(quiet) == []
    assert 'id="run-log-none"' in operator.get(f"/runs/{quiet.pk}/log/").content.decode()
    assert "not a verbose run" in operator.get(f"/runs/{quiet.pk}/").content.decode()
