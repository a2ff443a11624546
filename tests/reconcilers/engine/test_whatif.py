"""What if (reconcilers.engine.whatif) against kubesim: a Memcached's replica change previews the Deployment's diff
and the phase the run would record while every write is a dry run (no resourceVersion moves), and a spec the CRD's
schema refuses comes back as admission's causes, with nothing written."""

from __future__ import annotations

import pytest

from reconcilers.engine import kube, requestwatch, whatif
from reconcilers.kinds.memcached import MEMCACHED, PENDING, RUNNING
from tests.reconcilers.whatif_support import running_memcached, versions

pytestmark = pytest.mark.integration


def test_a_replica_change_previews_the_deployment_diff_and_the_phase_and_writes_nothing(kapi, namespace):
    rec, live, recorded = running_memcached(kapi, namespace)
    before = versions(kapi, namespace)
    preview = whatif.what_if(rec, kapi, live, {**live["spec"], "size": 3}, recorded)
    assert not preview.error and not preview.refused and not preview.dry_run_refused
    assert [(c.path, c.before, c.after) for c in preview.spec_diff] == [("spec.size", 1, 3)]
    assert preview.recorded_phase == RUNNING and preview.phase == PENDING
    assert preview.transitions == [f"{RUNNING} → {PENDING}"] and not preview.transition_refused
    assert preview.generation == live["metadata"]["generation"] + 1
    by_kind = {c.kind: c for c in preview.children}
    assert by_kind["Deployment"].action == "update"
    assert [(c.path, c.before, c.after) for c in by_kind["Deployment"].changes
            if c.path == "spec.replicas"] == [("spec.replicas", 1, 3)]
    assert by_kind["Service"].action == "unchanged"
    assert preview.admission and all(v.allowed for v in preview.admission)
    assert any(v.method == "PUT" and v.path.endswith("/status") for v in preview.admission)
    assert versions(kapi, namespace) == before  # nothing written
    assert kube.get_object(kapi, MEMCACHED, namespace, "mc")["spec"]["size"] == 1


def test_an_invalid_spec_shows_the_admission_refusal_and_writes_nothing(kapi, namespace):
    rec, live, recorded = running_memcached(kapi, namespace)
    before = versions(kapi, namespace)
    preview = whatif.what_if(rec, kapi, live, {**live["spec"], "size": -2}, recorded)
    assert preview.refused and not preview.children and preview.phase == ""
    assert any(c["field"] == "spec.size" for c in preview.causes), preview.causes
    assert [v.allowed for v in preview.admission] == [False] and preview.admission[0].code == 422
    assert versions(kapi, namespace) == before


def test_a_cluster_that_refuses_dry_run_is_named(kapi, namespace):
    rec, live, recorded = running_memcached(kapi, namespace)

    class NoDryRun(whatif.DryRunWatch):
        def query(self, method, path, query):  # the server answers as one that cannot dry-run
            q = super().query(method, path, query)
            return {**q, "dryRun": "Sometimes"} if q and "dryRun" in q else q

    before = versions(kapi, namespace)
    original = whatif.DryRunWatch
    whatif.DryRunWatch = NoDryRun
    try:
        preview = whatif.what_if(rec, kapi, live, {**live["spec"], "size": 2}, recorded)
    finally:
        whatif.DryRunWatch = original
    assert preview.dry_run_refused and "dry run" in preview.error.lower(), preview
    assert versions(kapi, namespace) == before


def test_without_a_watch_requests_are_sent_as_they_were():
    assert requestwatch.current() is None
    watch = whatif.DryRunWatch()
    with requestwatch.watching(watch):
        assert requestwatch.current() is watch
        assert watch.query("GET", "/x", None) is None
        assert watch.query("PATCH", "/x", {"force": True}) == {"force": True, "dryRun": "All"}
    assert requestwatch.current() is None
