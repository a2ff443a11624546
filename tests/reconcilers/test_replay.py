"""Replay (reconcilers.services.replay): a kept run's inputs (RunKeeper around the real step against kubesim) replay
offline to the same outcome; after a deliberate change to the kind's code the replay names the difference (the
Deployment's field, the phase); inputs past retention are gone, a run that kept none says so, a kind version that
is no longer served is named; Secrets' values are never kept."""

from __future__ import annotations

import pytest
from django.utils import timezone

from reconcilers.core.types import PermanentError
from reconcilers.engine import capture, capture_store, kube, step
from reconcilers.engine.run_keep import RunKeeper
from reconcilers.kinds import memcached
from reconcilers.kinds.memcached import MEMCACHED, PENDING, MemcachedReconciler
from reconcilers.models import ReconcileRun, RunCapture
from reconcilers.services import replay
from tests.reconcilers.whatif_support import running_memcached

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def kept_run(kapi, namespace, rec, recorded, *, keep=True):
    """One run of the Memcached (its spec changed to size 2), recorded with its capture; the run row."""
    obj = kube.patch_object(kapi, MEMCACHED, namespace, "mc", {"spec": {"size": 2}})
    key = MEMCACHED.request(namespace, "mc").key()
    with RunKeeper(rec, key, obj, recorded) as keeper:
        outcome = step.reconcile_step(rec, kapi, obj, recorded)
    run = ReconcileRun.objects.create(key=key, kind="Memcached", started_at=timezone.now(), duration_seconds=0.1,
                                      result=outcome.result)
    keeper.kept(run.pk, outcome, keep)
    return run, outcome


@pytest.fixture
def recorded_run(kapi, namespace, builtin_kinds_only):
    rec, _live, recorded = running_memcached(kapi, namespace)
    run, outcome = kept_run(kapi, namespace, rec, recorded)
    assert outcome.change.to_phase == PENDING
    return run


def test_a_recorded_run_replays_to_the_same_outcome(recorded_run):
    row = RunCapture.objects.get(run_id=recorded_run.pk)
    assert row.inputs and 0 < len(row.inputs) < row.inputs_bytes and row.kind_version == "cache.example.com/v1alpha1"
    report = replay.run_replay(recorded_run.pk)
    assert report.same, report.differences
    assert report.recorded["phase"] == report.replayed["phase"] == PENDING
    assert {c["kind"] for c in report.replayed["children"]} == {"Deployment", "Service"}


def test_a_change_to_the_kinds_code_shows_in_the_replay(recorded_run, monkeypatch):
    original = memcached.deployment_manifest

    def more_memory(obj, spec):
        manifest = original(obj, spec)
        manifest["spec"]["template"]["spec"]["containers"][0]["command"][2] = "128"
        return manifest

    monkeypatch.setattr(memcached, "deployment_manifest", more_memory)
    report = replay.run_replay(recorded_run.pk)
    assert not report.same
    (child,) = report.children
    assert (child.kind, child.change) == ("Deployment", "changed")
    assert [f.path for f in child.fields if "command" in f.path] == ["spec.template.spec.containers[0].command[2]"]

    class AlwaysFailed(MemcachedReconciler):
        def reconcile(self, ctx, obj):
            raise PermanentError("broken on purpose", reason="Broken")

    report = replay.run_replay(recorded_run.pk, AlwaysFailed())
    assert not report.same and any(d.startswith("phase: recorded 'Pending', replayed 'Failed'")
                                   for d in report.differences), report.differences


def test_gone_not_kept_and_a_version_no_longer_served_are_said(recorded_run, kapi, namespace):
    inputs = capture_store.capture_inputs(recorded_run.pk).inputs
    with pytest.raises(replay.ReplayRefused, match="needs Memcached cache.example.com/v0alpha9") as refused:
        replay.replay_inputs({**inputs, "kind_version": "cache.example.com/v0alpha9"})
    assert refused.value.why == "version_gone"
    assert capture_store.captures_expire(days=0) == 1
    with pytest.raises(replay.ReplayRefused, match="gone") as gone:
        replay.run_replay(recorded_run.pk)
    assert gone.value.why == "gone"
    plain = ReconcileRun.objects.create(key=recorded_run.key, kind="Memcached", started_at=timezone.now(),
                                        duration_seconds=0.1, result="success")
    with pytest.raises(replay.ReplayRefused, match="kept no inputs"):
        replay.run_replay(plain.pk)
    with pytest.raises(replay.ReplayRefused, match="no run"):
        replay.run_replay(10**12)


def test_a_run_not_kept_stores_nothing(kapi, namespace, builtin_kinds_only):
    rec, _live, recorded = running_memcached(kapi, namespace)
    run, _outcome = kept_run(kapi, namespace, rec, recorded, keep=False)
    assert not RunCapture.objects.filter(run_id=run.pk).exists()


def test_secrets_keep_their_keys_and_hashes_never_their_values():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "managedFields": [{}]},
              "data": {"password": "aHVudGVyMg=="}}
    kept = capture.slim(secret)
    assert kept["data"]["password"].startswith("sha256:") and "aHVudGVyMg" not in str(kept)
    assert "managedFields" not in kept["metadata"]
    listed = capture.InputCapture()
    listed.answered("GET", "/api/v1/namespaces/a/secrets", None, {"items": [{"metadata": {"name": "s"},
                                                                             "data": {"k": "c2VjcmV0"}}]}, None)
    assert "c2VjcmV0" not in str(listed.reads("/apis/x/v1/namespaces/a/things/t"))


def test_manage_py_replay_prints_the_comparison_and_fails_on_a_difference(recorded_run, monkeypatch):
    import io

    from django.core.management import call_command
    from django.core.management.base import CommandError

    out = io.StringIO()
    call_command("replay", str(recorded_run.pk), stdout=out)
    assert "phase       recorded Pending" in out.getvalue() and "outcome     the same" in out.getvalue()
    monkeypatch.setattr(MemcachedReconciler, "reconcile", lambda self, ctx, obj: (_ for _ in ()).throw(
        PermanentError("no", reason="Broken")))
    with pytest.raises(CommandError, match="another outcome"):
        call_command("replay", str(recorded_run.pk), stdout=io.StringIO())
    capture_store.captures_expire(days=0)
    with pytest.raises(CommandError, match="gone: the inputs of run"):
        call_command("replay", str(recorded_run.pk))


@pytest.fixture(scope="session")
def opsconsole_kinds():
    return [MemcachedReconciler]


def test_exported_inputs_replay_through_the_plugins_replay_run(recorded_run, replay_run, tmp_path):
    import io

    from django.core.management import call_command

    path = tmp_path / "run.json"
    call_command("replay", str(recorded_run.pk), "--export", str(path), stdout=io.StringIO())
    assert "aHVudGVy" not in path.read_text() and '"format": 1' in path.read_text()
    assert replay_run(str(path)).same
    assert replay_run(recorded_run.pk).same


def test_manage_py_retention_drops_inputs_past_their_retention_and_the_replay_says_gone(recorded_run, settings):
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("retention", "--spans-days", "7", stdout=out)
    assert "the kept inputs of 0 runs" in out.getvalue()
    settings.OPSCONSOLE_RUN_INPUTS_RETENTION_DAYS = 0
    call_command("retention", "--spans-days", "7", stdout=out)
    assert "the kept inputs of 1 runs" in out.getvalue()
    row = RunCapture.objects.get(run_id=recorded_run.pk)
    assert row.inputs is None and row.inputs_gone_at is not None
    with pytest.raises(replay.ReplayRefused, match="gone"):
        replay.run_replay(recorded_run.pk)
