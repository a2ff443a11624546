"""Live verbosity (reconcilers.engine.verbosity, run_keep): a setting for one object turns its runs' reconcile and
client modules to debug, the lines are kept with the run (bounded), other objects' runs stay quiet, the annotation
works the same, and the setting switches itself off at its expiry with no restart."""

from __future__ import annotations

import logging
import time

import pytest
from django.utils import timezone

from reconcilers.core.meta import rfc3339
from reconcilers.engine import kube, step, verbosity
from reconcilers.engine.run_keep import RunKeeper
from reconcilers.kinds.memcached import MEMCACHED
from reconcilers.models import ReconcileRun, RunCapture
from tests.reconcilers.whatif_support import running_memcached

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_modules_and_scopes_are_checked_by_name():
    assert verbosity.parse_modules("reconcile=debug,client=info") == {"reconcile": "debug", "client": "info"}
    assert verbosity.parse_modules("debug") == dict.fromkeys(verbosity.MODULES, "debug")
    for bad, field in (("db=debug", "modules"), ("reconcile=loud", "modules"), ("", "modules")):
        with pytest.raises(verbosity.VerbosityError) as refused:
            verbosity.parse_modules(bad)
        assert refused.value.field == field
    with pytest.raises(verbosity.VerbosityError, match="scope"):
        verbosity.scope_check("object:not-a-key")
    # an object of another cluster: its key carries the cluster (issue 41)
    assert verbosity.scope_check("object:prod/apps.example.com/v1/things/ns/x") == \
        "object:prod/apps.example.com/v1/things/ns/x"
    for bad in ("object:Prod/g/v1/things/ns/x", "object:a/b/g/v1/things/ns/x", "object:g/v1/things/ns/"):
        with pytest.raises(verbosity.VerbosityError, match="scope"):
            verbosity.scope_check(bad)


def run_once(kapi, namespace, rec, recorded, queue):
    """One step of the Memcached inside a RunKeeper, recorded; (the run, its capture row or None)."""
    obj = kube.get_object(kapi, MEMCACHED, namespace, "mc")
    key = MEMCACHED.request(namespace, "mc").key()
    with RunKeeper(rec, key, obj, recorded, queue) as keeper:
        outcome = step.reconcile_step(rec, kapi, obj, recorded)
    run = ReconcileRun.objects.create(key=key, kind="Memcached", started_at=timezone.now(), duration_seconds=0.1,
                                      result=outcome.result)
    keeper.kept(run.pk, outcome, keep=False)
    return run, RunCapture.objects.filter(run_id=run.pk).first()


def test_an_objects_runs_log_at_debug_until_the_expiry_and_the_lines_are_kept(kapi, namespace, queue,
                                                                               builtin_kinds_only):
    rec, _live, recorded = running_memcached(kapi, namespace)
    scope = f"object:{MEMCACHED.request(namespace, 'mc').key()}"
    verbosity.setting_store(verbosity.Store.of(queue), verbosity.Setting(
        scope, {"reconcile": "debug", "client": "debug"}, time.time() + 1.5, actor="user:ann"))
    verbosity.CACHE.forget()
    try:
        level = logging.getLogger(f"reconcilers.{rec.name}").level
        _run, kept = run_once(kapi, namespace, rec, recorded, queue)
        assert kept is not None and kept.log_level == "debug" and kept.inputs is None  # lines only: not a kept run
        text = "\n".join(kept.log_lines)
        assert "verbose run (reconcile=debug,client=debug" in text and "set by user:ann" in text
        assert "GET /api/v1/namespaces/" in text and "PATCH /apis/apps/v1/" in text  # the client module: each request
        assert logging.getLogger(f"reconcilers.{rec.name}").level == level  # put back after the run
        time.sleep(1.6)  # past the expiry: no restart, no clearing
        verbosity.CACHE.forget()
        _run, quiet = run_once(kapi, namespace, rec, recorded, queue)
        assert quiet is None
    finally:
        verbosity.setting_clear(verbosity.Store.of(queue), scope)


def test_the_annotation_turns_one_object_verbose_until_its_expiry(kapi, namespace, queue, builtin_kinds_only):
    rec, _live, recorded = running_memcached(kapi, namespace)
    until = rfc3339(timezone.now() + timezone.timedelta(minutes=5))
    kube.patch_object(kapi, MEMCACHED, namespace, "mc", {"metadata": {"annotations": {
        verbosity.ANNOTATION: "client=debug", verbosity.ANNOTATION_UNTIL: until}}})
    verbosity.CACHE.forget()
    _run, kept = run_once(kapi, namespace, rec, recorded, queue)
    assert kept is not None and any(" GET " in line or "GET /" in line for line in kept.log_lines)
    past = rfc3339(timezone.now() - timezone.timedelta(seconds=1))
    kube.patch_object(kapi, MEMCACHED, namespace, "mc", {"metadata": {"annotations": {
        verbosity.ANNOTATION_UNTIL: past}}})
    assert run_once(kapi, namespace, rec, recorded, queue)[1] is None


def test_lines_are_bounded_and_other_threads_records_are_not_taken():
    handler = verbosity.RunLog(verbosity.Setting("all", {"reconcile": "debug"}, time.time() + 60), "memcached")
    handler.attach()
    try:
        logger = logging.getLogger("reconcilers.memcached")
        for i in range(verbosity.MAX_LINES + 5):
            logger.debug("line %d %s", i, "x" * 2000)
    finally:
        handler.detach()
    assert len(handler.lines) == verbosity.MAX_LINES and handler.dropped == 5
    assert all(len(line) <= verbosity.MAX_LINE for line in handler.lines)
