"""reconcile_record, resource_mirror_upsert and resource_mirror_mark_deleted: one transaction per reconcile,
one transition per phase change, none on a repeat, anomalies for refused changes, chained rows, requests
finished, concurrent runs serialised; the mirror upsert never touches the phase."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, connections

from reconcilers.engine.audit import chain_verify, row_fields, transition_hash
from reconcilers.engine.recording import (
    PhaseChange,
    reconcile_record,
    resource_mirror_mark_deleted,
    resource_mirror_upsert,
    resource_mirror_write,
)
from reconcilers.models import Anomaly, ReconcileRequest, ReconcileRun, Resource, Transition
from tests.reconcilers.audit_support import KIND, MACHINE, observed, record, record_phases, run_for

pytestmark = pytest.mark.django_db


def phases(uid: str) -> list[tuple[str, str]]:
    return list(Transition.objects.filter(resource_uid=uid).order_by("seq").values_list("from_phase", "to_phase"))


class TestTransitions:
    def test_the_first_phase_from_none_is_pending_with_seq_1_and_an_empty_prev_hash(self):
        outcome = record(observed("u1"), "Pending", reason="Created")
        (row,) = Transition.objects.filter(resource_uid="u1")
        assert outcome.transition_ids == [row.id] and (outcome.from_phase, outcome.to_phase) == ("", "Pending")
        assert (row.seq, row.from_phase, row.to_phase, row.reason, row.prev_hash) == (1, "", "Pending", "Created", "")
        assert (row.kind, row.namespace, row.name, row.actor) == ("Memcached", "default", "m-u1", "controller")
        assert row.run_id == outcome.run_id and row.trace_id == "ab" * 16

    def test_a_first_phase_other_than_the_initial_one_enters_pending_first(self):
        outcome = record(observed("u1"), "Running", reason="AllReady")
        assert phases("u1") == [("", "Pending"), ("Pending", "Running")]
        assert len(outcome.transition_ids) == 2 and outcome.to_phase == "Running"
        first, second = Transition.objects.filter(resource_uid="u1").order_by("seq")
        assert (first.reason, second.reason) == ("Initialized", "AllReady")

    def test_it_records_exactly_one_transition_per_phase_change_and_none_for_a_repeat(self):
        for phase in ["Pending", "Pending", "Running", "Running", "Running", "Pending", "Running"]:
            record(observed("u1"), phase)
        assert phases("u1") == [("", "Pending"), ("Pending", "Running"), ("Running", "Pending"), ("Pending", "Running")]
        assert ReconcileRun.objects.filter(key__endswith="/m-u1").count() == 7

    def test_a_rerun_of_the_same_reconcile_after_its_commit_records_nothing(self):
        obj = observed("u1")
        record(obj, "Pending")
        first = record(obj, "Running")
        again = record(obj, "Running")
        assert first.transition_ids and again.transition_ids == []
        assert (again.from_phase, again.to_phase) == ("Running", "Running")
        assert Transition.objects.filter(resource_uid="u1").count() == 2

    def test_the_from_phase_is_the_recorded_one_not_the_live_status(self):
        record(observed("u1"), "Pending")
        # a worker wrote status.phase=Running, then was killed before its commit: the next run still records it
        outcome = record(observed("u1", status={"phase": "Running"}), "Running")
        assert outcome.from_phase == "Pending" and phases("u1")[-1] == ("Pending", "Running")

    def test_each_row_chains_onto_the_previous_one_and_the_resource_holds_the_head(self):
        rows = record_phases("u1", ["Pending", "Running", "Degraded", "Running", "Failed", "Pending"])
        assert [r.seq for r in rows] == [1, 2, 3, 4, 5, 6]
        assert rows[0].prev_hash == ""
        for prev, row in zip(rows, rows[1:], strict=False):
            assert row.prev_hash == prev.hash
        for row in rows:
            assert row.hash == transition_hash(row_fields(row), row.prev_hash)
        resource = Resource.objects.get(uid="u1")
        assert (resource.last_transition_seq, resource.last_transition_hash) == (6, rows[-1].hash)
        assert chain_verify().ok

    def test_the_phase_and_phase_since_move_only_with_a_transition(self):
        record(observed("u1"), "Pending")
        since = Resource.objects.get(uid="u1").phase_since
        record(observed("u1"), "Pending", reason="Waiting", message="1/3 ready")
        resource = Resource.objects.get(uid="u1")
        assert (resource.phase, resource.phase_since) == ("Pending", since)
        assert (resource.reason, resource.message) == ("Waiting", "1/3 ready")
        record(observed("u1"), "Running")
        resource.refresh_from_db()
        assert resource.phase == "Running" and resource.phase_since > since
        assert resource.phase_since == Transition.objects.get(resource_uid="u1", seq=2).created_at

    def test_a_user_actor_is_recorded_and_an_invalid_one_is_refused(self):
        obj = observed("u1")
        reconcile_record(run_for(obj), obj, PhaseChange("Pending", "Manual", "", actor="user:ann"), MACHINE)
        assert Transition.objects.get(resource_uid="u1").actor == "user:ann"
        with pytest.raises(ValueError, match="actor"):
            reconcile_record(run_for(obj), obj, PhaseChange("Running", "R", "", actor="ann"), MACHINE)
        with pytest.raises(ValueError, match="result"):
            reconcile_record(run_for(obj, result="ok"), obj, None, MACHINE)
        assert ReconcileRun.objects.count() == 1


class TestAnomalies:
    def test_a_refused_change_is_recorded_as_an_anomaly_and_the_phase_stays(self):
        record(observed("u1"), "Pending")
        outcome = record(observed("u1"), "Deleted", reason="Gone")
        anomaly = Anomaly.objects.get()
        assert outcome.anomaly_id == anomaly.id and outcome.transition_ids == []
        assert (outcome.from_phase, outcome.to_phase) == ("Pending", "Pending")
        assert (anomaly.from_phase, anomaly.to_phase, anomaly.reason, anomaly.run_id) == (
            "Pending", "Deleted", "Gone", outcome.run_id
        )
        assert "does not allow Pending -> Deleted" in anomaly.detail and "Running" in anomaly.detail
        assert Resource.objects.get(uid="u1").phase == "Pending"
        assert phases("u1") == [("", "Pending")]

    def test_a_repeated_refused_change_at_the_same_generation_is_one_anomaly_and_a_new_generation_another(self):
        record(observed("u1"), "Pending")
        first = record(observed("u1"), "Deleted").anomaly_id
        assert record(observed("u1"), "Deleted").anomaly_id == first
        second = record(observed("u1", generation=2), "Deleted").anomaly_id
        assert second != first and Anomaly.objects.count() == 2

    def test_a_phase_the_machine_does_not_know_is_refused(self):
        record(observed("u1"), "Pending")
        outcome = record(observed("u1"), "Exploded")
        assert "not a state" in Anomaly.objects.get(id=outcome.anomaly_id).detail

    def test_from_no_phase_a_refused_target_still_enters_the_initial_phase(self):
        outcome = record(observed("u1"), "Deleted")
        assert phases("u1") == [("", "Pending")] and outcome.anomaly_id is not None


class TestRunsAndTheMirror:
    def test_the_run_is_recorded_with_everything_the_runner_measured(self):
        obj = observed("u1")
        started = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
        outcome = record(
            obj, None, started_at=started, duration_seconds=1.5, result="error", error_class="ValueError",
            error_message="boom", attempt=3, worker="host:1:abc",
        )
        run = ReconcileRun.objects.get(id=outcome.run_id)
        assert (run.key, run.kind, run.started_at, run.duration_seconds, run.result) == (
            "cache.example.com/v1alpha1/memcacheds/default/m-u1", "Memcached", started, 1.5, "error"
        )
        assert (run.error_class, run.error_message, run.attempt, run.worker) == ("ValueError", "boom", 3, "host:1:abc")
        assert run.resource.uid == "u1" and outcome.transition_ids == [] and Transition.objects.count() == 0

    def test_the_mirror_takes_what_the_runner_observed(self):
        owner = {"apiVersion": "v1", "kind": "X", "name": "o", "uid": "o1", "controller": True}
        obj = observed(
            "u1", generation=4, observed_generation=4, labels={"a": "b"}, owner=owner, spec={"size": 5},
            status={"phase": "Running", "readyReplicas": 5}, conditions=[{"type": "Ready", "status": "True"}],
        )
        record(obj, "Pending", result="requeue_after")
        r = Resource.objects.get(uid="u1")
        assert (r.key, r.group, r.version, r.plural, r.kind) == (
            "cache.example.com/v1alpha1/memcacheds/default/m-u1", "cache.example.com", "v1alpha1", "memcacheds",
            "Memcached",
        )
        assert (r.generation, r.observed_generation, r.resource_version) == (4, 4, obj.resource_version)
        assert (r.labels, r.owner, r.spec, r.status["readyReplicas"]) == ({"a": "b"}, owner, {"size": 5}, 5)
        assert r.conditions == [{"type": "Ready", "status": "True"}]
        assert r.last_result == "requeue_after" and r.last_reconcile_at is not None and not r.deleted

    def test_an_observed_deletion_marks_the_mirror_deleted(self):
        record(observed("u1"), "Pending")
        record(observed("u1"), "Terminating")
        record(observed("u1", deleted=True), "Deleted")
        r = Resource.objects.get(uid="u1")
        assert r.deleted and r.deleted_at is not None and r.phase == "Deleted"
        assert phases("u1")[-2:] == [("Pending", "Terminating"), ("Terminating", "Deleted")]

    def test_an_older_observation_does_not_roll_the_mirror_back(self):
        record(observed("u1", resource_version="50", spec={"size": 5}), "Pending")
        record(observed("u1", resource_version="40", spec={"size": 1}), "Running")
        r = Resource.objects.get(uid="u1")
        assert (r.resource_version, r.spec, r.phase) == ("50", {"size": 5}, "Running")


class TestRequests:
    def make(self, token: str, minutes_ago: int, **kw) -> ReconcileRequest:
        return ReconcileRequest.objects.create(
            key="cache.example.com/v1alpha1/memcacheds/default/m-u1", token=token, actor="user:ann",
            requested_at=datetime.now(UTC) - timedelta(minutes=minutes_ago), **kw,
        )

    def test_the_handled_request_and_older_open_ones_succeed_with_the_run_transition_and_trace(self):
        older, handled, newer = self.make("t0", 10), self.make("t1", 5, state="picked_up"), self.make("t2", 1)
        done_before = self.make("tx", 20, state="failed", error="earlier")
        outcome = record(observed("u1"), "Pending", request_token="t1", trace_id="cd" * 16)
        for row in (older, handled):
            row.refresh_from_db()
            assert (row.state, row.run_id, row.transition_id, row.trace_id) == (
                "succeeded", outcome.run_id, outcome.transition_ids[0], "cd" * 16
            )
            assert row.resource.uid == "u1" and row.finished_at is not None and row.picked_up_at is not None
        newer.refresh_from_db()
        done_before.refresh_from_db()
        assert (newer.state, newer.run_id) == ("requested", None)
        assert (done_before.state, done_before.error, done_before.run_id) == ("failed", "earlier", None)
        assert ReconcileRun.objects.get(id=outcome.run_id).request_id == handled.id

    def test_a_handled_request_of_an_erroring_run_fails_with_the_error(self):
        request = self.make("t1", 1)
        record(
            observed("u1"), None, request_token="t1", result="error", error_class="ApiException", error_message="503"
        )
        request.refresh_from_db()
        assert (request.state, request.error, request.transition_id) == ("failed", "ApiException: 503", None)

    def test_a_run_without_a_token_leaves_requests_open(self):
        request = self.make("t1", 1)
        record(observed("u1"), "Pending")
        request.refresh_from_db()
        assert request.state == "requested" and request.finished_at is None


def api_object(uid: str = "u1", *, rv: str = "10", generation: int = 1, **extra) -> dict:
    obj = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {
            "uid": uid, "name": "m1", "namespace": "default", "resourceVersion": rv, "generation": generation,
            "labels": {"app": "m"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "a1"},
                {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "b1", "controller": True},
            ],
        },
        "spec": {"size": 3},
        "status": {"phase": "Running", "observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    obj.update(extra)
    return obj


class TestMirrorUpsert:
    def test_it_creates_the_mirror_from_the_api_object(self):
        resource_mirror_upsert(KIND, api_object())
        r = Resource.objects.get(uid="u1")
        assert (r.kind, r.namespace, r.name) == ("Memcached", "default", "m1")
        assert (r.generation, r.resource_version) == (1, "10")
        assert r.owner["uid"] == "b1" and r.labels == {"app": "m"} and r.spec == {"size": 3}
        assert r.observed_generation == 1 and r.conditions == [{"type": "Ready", "status": "True"}]
        assert r.key == "cache.example.com/v1alpha1/memcacheds/default/m1"

    def test_it_never_touches_the_phase_even_when_the_live_status_says_another(self):
        record(observed("u1", name="m1"), "Pending", reason="Created", message="waiting")
        before = Resource.objects.get(uid="u1")
        resource_mirror_upsert(KIND, api_object(rv="999", generation=2, spec={"size": 9}))
        r = Resource.objects.get(uid="u1")
        assert (r.phase, r.phase_since, r.reason, r.message) == ("Pending", before.phase_since, "Created", "waiting")
        assert (r.last_transition_seq, r.last_transition_hash) == (1, before.last_transition_hash)
        assert (r.generation, r.spec, r.status["phase"]) == (2, {"size": 9}, "Running")

    def test_a_stale_event_changes_nothing_and_an_object_without_uid_is_refused(self):
        resource_mirror_upsert(KIND, api_object(rv="20", generation=2))
        resource_mirror_upsert(KIND, api_object(rv="15", generation=1))
        assert Resource.objects.get(uid="u1").generation == 2
        with pytest.raises(ValueError, match="uid"):
            resource_mirror_upsert(KIND, {"metadata": {"name": "x"}})

    def test_a_cluster_scoped_object_has_no_namespace(self):
        tenant = type(KIND)("tenancy.example.com", "v1alpha1", "tenants", "Tenant", namespaced=False)
        resource_mirror_upsert(tenant, {"metadata": {"uid": "t1", "name": "acme", "resourceVersion": "1"}})
        r = Resource.objects.get(uid="t1")
        assert (r.namespace, r.key, r.owner) == ("", "tenancy.example.com/v1alpha1/tenants//acme", None)

    def test_mark_deleted_marks_once_and_ignores_unknown_uids(self):
        resource_mirror_upsert(KIND, api_object())
        resource_mirror_mark_deleted("u1")
        first = Resource.objects.get(uid="u1").deleted_at
        resource_mirror_mark_deleted("u1")
        resource_mirror_mark_deleted("nobody")
        r = Resource.objects.get(uid="u1")
        assert r.deleted and r.deleted_at == first and Resource.objects.count() == 1


def named(uid: str, name: str, rv: str) -> dict:
    obj = api_object(uid, rv=rv)
    obj["metadata"]["name"] = name
    return obj


class TestMirrorWrite:
    def test_one_batch_creates_updates_skips_the_stale_and_marks_deleted(self, django_assert_max_num_queries):
        resource_mirror_upsert(KIND, api_object(rv="20"))
        resource_mirror_upsert(KIND, named("u3", "m3", "5"))
        with django_assert_max_num_queries(8):  # whatever the batch size: select, insert, lock, update, delete
            resource_mirror_write(
                [(KIND, api_object(rv="21", generation=2)), (KIND, named("u2", "m2", "7")),
                 (KIND, api_object(rv="22", generation=3)), (KIND, named("u3", "m3", "4"))],
                deleted=["u3"],
            )
        rows = {r.uid: r for r in Resource.objects.all()}
        assert (rows["u1"].generation, rows["u1"].resource_version) == (3, "22")  # the last object of a uid wins
        assert (rows["u2"].name, rows["u2"].resource_version) == ("m2", "7")
        assert rows["u3"].resource_version == "5" and rows["u3"].deleted  # stale object skipped, then deleted

    def test_the_same_resource_version_is_not_written_again(self):
        resource_mirror_upsert(KIND, api_object(rv="20"))
        before = Resource.objects.get(uid="u1").updated_at
        resource_mirror_upsert(KIND, api_object(rv="20", spec={"size": 99}))  # the echo of what was recorded
        r = Resource.objects.get(uid="u1")
        assert (r.updated_at, r.spec) == (before, {"size": 3})


def run_in_threads(count: int, target) -> list[BaseException]:
    """Start `count` threads released together; each runs target() on its own connection."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def body() -> None:
        try:
            barrier.wait(timeout=10)
            target()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=body) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    return errors


@pytest.mark.django_db(transaction=True)
class TestConcurrency:
    def test_two_runs_recording_the_same_change_at_once_record_one_transition(self):
        assert connection.vendor in ("postgresql", "sqlite")
        for round_ in range(5):
            uid = f"race-{round_}"
            record(observed(uid), "Pending")
            obj = observed(uid)
            assert run_in_threads(2, lambda obj=obj: record(obj, "Running")) == []
            assert phases(uid) == [("", "Pending"), ("Pending", "Running")]
            assert ReconcileRun.objects.filter(resource__uid=uid).count() == 3
        assert chain_verify().ok

    def test_two_first_runs_of_an_unknown_object_create_one_resource_and_one_first_transition(self):
        for round_ in range(5):
            uid = f"new-{round_}"
            obj = observed(uid)
            assert run_in_threads(2, lambda obj=obj: record(obj, "Pending")) == []
            assert Resource.objects.filter(uid=uid).count() == 1
            assert phases(uid) == [("", "Pending")]
        assert chain_verify().ok
