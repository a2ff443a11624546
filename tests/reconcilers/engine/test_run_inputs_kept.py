"""Through runner.run against kubesim, the database and Redis (tracing's ratio 0, slow runs not kept): a run that
went well keeps no inputs; one that ended in an error keeps them (and replays to the same outcome); a verbose
object's run keeps its lines whether or not it is kept."""

from __future__ import annotations

import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from reconcilers.engine import kube, runner, sampling, verbosity
from reconcilers.models import ReconcileRun, RunCapture
from reconcilers.services import replay
from tests.reconcilers.testkinds import GADGET, gadget

GADGETS = ["tests.reconcilers.testkinds.GadgetReconciler"]

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def unsampled(settings):
    previous = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER = TracerProvider(sampler=sampling.ReconcileSampler(0.0))
    settings.OPSCONSOLE_TRACE_SLOW_SECONDS = 0  # 0: no run is kept for being slow
    yield
    trace._TRACER_PROVIDER = previous


def test_only_kept_runs_keep_inputs_and_a_verbose_run_keeps_its_lines(unsampled, kapi, namespace, workqueue,
                                                                      reconcilers):
    reconcilers(GADGETS)

    def run(name: str, **spec: object) -> ReconcileRun:
        if kube.get_object(kapi, GADGET, namespace, name) is None:
            kube.create_object(kapi, GADGET, gadget(namespace, name, **spec))
        key = GADGET.request(namespace, name).key()
        workqueue.add(key)
        runner.run(key)
        return ReconcileRun.objects.filter(key=key).latest("id")

    quiet = run("quiet", mode="ok")
    assert quiet.result == "success" and not RunCapture.objects.filter(run_id=quiet.pk).exists()
    broken = run("broken", mode="permanent")
    kept = RunCapture.objects.get(run_id=broken.pk)
    assert broken.result == "error" and kept.inputs and not kept.log_lines
    assert replay.run_replay(broken.pk).same
    scope = f"object:{GADGET.request(namespace, 'quiet').key()}"
    verbosity.setting_store(verbosity.Store.of(workqueue), verbosity.Setting(
        scope, {"reconcile": "debug", "client": "debug"}, time.time() + 60, actor="user:ann"))
    verbosity.CACHE.forget()
    try:
        loud = run("quiet")
    finally:
        verbosity.setting_clear(verbosity.Store.of(workqueue), scope)
        verbosity.CACHE.forget()
    lines = RunCapture.objects.get(run_id=loud.pk)
    assert lines.inputs is None and any("verbose run" in line for line in lines.log_lines)
