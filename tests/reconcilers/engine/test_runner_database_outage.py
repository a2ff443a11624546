"""runner.run(key) when the database fails in the middle of the recording (after the run row was written,
before its transitions): the recording transaction leaves nothing behind, the run is an error retried with
backoff (it used to drop the key until the next resync), and the retry records each transition once."""

from __future__ import annotations

import pytest
from django.db import OperationalError

from reconcilers.engine import runner
from reconcilers.models import ReconcileRun, Resource, Transition
from tests.reconcilers.engine.test_runner import live, phases

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_a_run_whose_recording_breaks_records_nothing_and_is_retried_with_backoff(make, kapi, workqueue,
                                                                                   monkeypatch):
    key, obj = make(mode="ok")
    uid = obj["metadata"]["uid"]
    real_save = Transition.save

    def connection_lost(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(Transition, "save", connection_lost)  # the first transition's INSERT
    assert workqueue.add(key)
    assert runner.run(key) == "error"
    assert live(kapi, key)["status"]["phase"] == "Running"  # the status write happened before the recording
    assert not ReconcileRun.objects.filter(key=key).exists()  # the run row went with the transaction
    assert not Transition.objects.filter(resource_uid=uid).exists()
    assert Resource.objects.filter(uid=uid, phase="").count() in (0, 1)  # no phase recorded either
    snap = workqueue.snapshot()
    assert workqueue.failures(key) == 1 and [i.key for i in snap.backing_off] == [key]  # retried, not dropped
    assert snap.processing_count == 0  # the lease was released

    monkeypatch.setattr(Transition, "save", real_save)
    assert workqueue.retry_now(key)
    assert runner.run(key) == "success"
    assert phases(uid) == [("", "Pending"), ("Pending", "Running")]  # recorded once, on the retry
    (run,) = ReconcileRun.objects.filter(key=key)
    assert run.attempt == 2 and run.result == "success"
    assert workqueue.failures(key) == 0
