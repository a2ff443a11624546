"""The one-statement record (recording_sql): the same rows as the locked path, written in one statement while
the chain head is as the run read it, and nothing written (the locked path records) when it moved or when the
run needs more than that path does."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, connections

from reconcilers.engine import recording
from reconcilers.engine.audit import chain_verify
from reconcilers.engine.healing.state import resource_state
from reconcilers.engine.recording import PhaseChange, reconcile_record, resource_mirror_upsert
from reconcilers.engine.recording_sql import ChainHead, reconcile_record_one_statement
from reconcilers.models import ReconcileRun, Resource, SpecRevision, Transition
from tests.reconcilers.audit_support import KIND, MACHINE, observed, record, run_for

pytestmark = pytest.mark.django_db
postgres_only = pytest.mark.skipif("connection.vendor != 'postgresql'", reason="the one-statement path is PostgreSQL's")


def live_of(obj: recording.ObservedObject, *, manager: str = "kubectl-client-side-apply") -> dict[str, Any]:
    """The live object the API returned for `obj` (managedFields naming who wrote the spec)."""
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"uid": obj.uid, "name": obj.name, "namespace": obj.namespace, "generation": obj.generation,
                         "resourceVersion": obj.resource_version,
                         "managedFields": [{"manager": manager, "operation": "Update", "time": "2026-12-01T10:00:00Z",
                                            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:size": {}}}}]},
            "spec": obj.spec, "status": obj.status}


def head_of(uid: str) -> ChainHead:
    state = resource_state(uid, head=True)
    assert state is not None and state.head is not None
    return state.head


def created(uid: str) -> None:
    """The object's mirror row, as the controller creates it before the first run."""
    obj = observed(uid)
    resource_mirror_upsert(KIND, {"metadata": {"uid": uid, "name": obj.name, "namespace": obj.namespace,
                                               "resourceVersion": "1", "generation": 1}, "spec": obj.spec})


def record_with_head(obj: recording.ObservedObject, to_phase: str | None, head: ChainHead | None = None, *,
                     live: bool = True, **run: Any) -> recording.RecordOutcome:
    change = PhaseChange(to_phase, "Reconciled", f"now {to_phase}") if to_phase else None
    return reconcile_record(run_for(obj, **run), obj, change, MACHINE, live=live_of(obj) if live else None,
                            head=head or head_of(obj.uid))


def one_statement(obj: recording.ObservedObject, to_phase: str | None, head: ChainHead, **kwargs: Any):
    change = PhaseChange(to_phase, "Reconciled", f"now {to_phase}") if to_phase else None
    return reconcile_record_one_statement(run_for(obj), obj, change, MACHINE, head, live=live_of(obj),
                                          moves=[], **kwargs)


def test_the_run_id_is_reserved_on_postgresql_only():
    created("u1")
    assert (head_of("u1").next_run_id is not None) == (connection.vendor == "postgresql")
    # and SQLite records through the locked path all the same
    outcome = record_with_head(observed("u1"), "Pending")
    assert Transition.objects.filter(id__in=outcome.transition_ids).count() == 1 and chain_verify().ok


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_first_run_writes_its_revision_run_and_transitions_in_one_statement(django_assert_num_queries):
    created("u1")
    head = head_of("u1")
    obj = observed("u1", generation=1)
    with django_assert_num_queries(1):
        outcome = one_statement(obj, "Running", head)
    assert outcome is not None and outcome.run_id == head.next_run_id
    revision = SpecRevision.objects.get(resource_uid="u1")
    first, second = Transition.objects.filter(resource_uid="u1").order_by("seq")
    assert outcome.revision_id == revision.id and outcome.transition_ids == [first.id, second.id]
    assert [(t.from_phase, t.to_phase) for t in (first, second)] == [("", "Pending"), ("Pending", "Running")]
    assert revision.actor == "manager:kubectl-client-side-apply" and revision.prev_hash == ""
    assert first.prev_hash == revision.hash and second.prev_hash == first.hash  # the revision comes first
    assert first.run_id == second.run_id == outcome.run_id
    r = Resource.objects.get(uid="u1")
    assert (r.phase, r.last_transition_seq, r.last_revision_seq) == ("Running", 2, 1)
    assert r.last_transition_hash == second.hash
    assert (r.resource_version, r.last_result, r.reason) == (obj.resource_version, "success", "Reconciled")
    assert chain_verify().ok


@postgres_only
def test_it_writes_what_the_locked_path_writes():
    sequence = [("Pending", {}), ("Running", {"readyReplicas": 3}), ("Running", {}), (None, {}), ("Degraded", {}),
                ("Running", {"x": 1})]
    for uid, fast in (("locked", False), ("fast", True)):
        created(uid)
        for phase, status in sequence:
            obj = observed(uid, status=status)
            if fast:
                assert one_statement(obj, phase, head_of(uid)) is not None
            else:
                change = PhaseChange(phase, "Reconciled", f"now {phase}") if phase else None
                reconcile_record(run_for(obj), obj, change, MACHINE, live=live_of(obj))

    def rows(uid: str) -> dict[str, list]:
        return {
            "transitions": list(Transition.objects.filter(resource_uid=uid).order_by("seq").values_list(
                "seq", "from_phase", "to_phase", "reason", "message", "actor", "generation", "trace_id",
                "hash_version")),
            "revisions": list(SpecRevision.objects.filter(resource_uid=uid).values_list(
                "seq", "chain_after", "generation", "spec", "diff", "actor", "operation", "managers")),
            "runs": list(ReconcileRun.objects.filter(resource__uid=uid).order_by("id").values_list(
                "kind", "result", "attempt", "worker", "trace_id")),
            "resource": list(Resource.objects.filter(uid=uid).values_list(
                "phase", "reason", "message", "last_transition_seq", "last_revision_seq", "generation", "spec",
                "status", "labels", "last_result", "deleted")),
        }

    assert rows("fast") == rows("locked")
    assert len(rows("fast")["transitions"]) == 4 and chain_verify().ok


@postgres_only
def test_a_head_that_moved_after_the_read_writes_nothing_and_the_locked_path_records_once():
    created("u1")
    record_with_head(observed("u1"), "Pending")
    stale = head_of("u1")
    record(observed("u1"), "Running")  # another run moved the phase (and the head) meanwhile
    runs = ReconcileRun.objects.count()
    assert one_statement(observed("u1"), "Running", stale) is None
    assert ReconcileRun.objects.count() == runs  # nothing of it written
    outcome = record_with_head(observed("u1"), "Running", stale)
    assert outcome.transition_ids == [] and (outcome.from_phase, outcome.to_phase) == ("Running", "Running")
    assert list(Transition.objects.filter(resource_uid="u1").values_list("to_phase", flat=True)) == [
        "Pending", "Running"]
    assert chain_verify().ok


@postgres_only
def test_an_older_observation_moves_the_phase_but_not_the_mirror_back():
    created("u1")
    record_with_head(observed("u1", resource_version="50", spec={"size": 5}), "Pending")
    outcome = one_statement(observed("u1", resource_version="40", spec={"size": 1}), "Running", head_of("u1"))
    assert outcome is not None
    r = Resource.objects.get(uid="u1")
    assert (r.resource_version, r.spec, r.phase) == ("50", {"size": 5}, "Running")


@postgres_only
@pytest.mark.parametrize("case", ["request", "refused", "new generation", "rollback", "deleted", "no row lock"])
def test_what_only_the_locked_path_records_is_left_to_it(case):
    created("u1")
    record_with_head(observed("u1"), "Pending")
    obj, phase, kwargs = observed("u1"), "Running", {}
    if case == "rollback":
        Resource.objects.filter(uid="u1").update(rollback={"state": "in_progress"})
    head = head_of("u1")
    if case == "request":
        outcome = reconcile_record_one_statement(run_for(obj, request_token="t-1"), obj,
                                                 PhaseChange("Running", "R", ""), MACHINE, head, moves=[])
        assert outcome is None
        return
    if case == "refused":
        phase = "Deleted"  # Pending -> Deleted is not allowed
    elif case == "new generation":
        obj = observed("u1", generation=2, spec={"size": 4})
    elif case == "deleted":
        obj = observed("u1", deleted=True)
    elif case == "no row lock":
        head = ChainHead(**{**head.__dict__, "next_run_id": None})
    runs = ReconcileRun.objects.count()
    assert one_statement(obj, phase, head, **kwargs) is None
    assert ReconcileRun.objects.count() == runs
    # reconcile_record with that head still records it, through the locked path
    outcome = record_with_head(obj, phase, head)
    assert ReconcileRun.objects.filter(id=outcome.run_id).exists() and chain_verify().ok
    if case == "new generation":  # its diff from the first revision's spec
        first, second = SpecRevision.objects.filter(resource_uid="u1").order_by("seq")
        assert (first.generation, second.generation) == (1, 2) and second.diff and second.diff != first.diff


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_runs_swapping_against_the_same_head_record_one_transition():
    for round_ in range(5):
        uid = f"race-{round_}"
        created(uid)
        record_with_head(observed(uid), "Pending")
        head = head_of(uid)
        errors: list[BaseException] = []
        barrier = threading.Barrier(2)

        def go(obj=observed(uid), head=head, barrier=barrier, errors=errors) -> None:
            try:
                barrier.wait()
                record_with_head(obj, "Running", head)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=go) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert list(Transition.objects.filter(resource_uid=uid).order_by("seq").values_list("to_phase", flat=True)) == [
            "Pending", "Running"]
        assert ReconcileRun.objects.filter(resource__uid=uid).count() == 3
    assert chain_verify().ok


def api_object(uid: str, rv: str, *, size: int = 3) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": f"m-{uid}", "namespace": "default", "resourceVersion": rv,
                         "generation": 1, "labels": {"app": "memcached"}}, "spec": {"size": size}}


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_the_mirror_batch_is_one_statement_that_skips_echoes_and_older_versions(django_assert_num_queries):
    with django_assert_num_queries(1):
        recording.resource_mirror_write([(KIND, api_object("a", "10")), (KIND, api_object("b", "20"))])
    Resource.objects.filter(uid="a").update(phase="Running")  # the recording's: the mirror never touches it
    before = dict(Resource.objects.values_list("uid", "updated_at"))
    with django_assert_num_queries(1):
        recording.resource_mirror_write([
            (KIND, api_object("b", "19", size=1)),  # older than the row: skipped
            (KIND, api_object("a", "10", size=9)),  # an echo of the version on record: skipped
            (KIND, api_object("c", "5")),  # new
            (KIND, api_object("a", "11", size=4)),  # the same uid again: its last object wins
        ])
    rows = {r.uid: r for r in Resource.objects.all()}
    assert (rows["a"].resource_version, rows["a"].spec, rows["a"].phase) == ("11", {"size": 4}, "Running")
    assert (rows["b"].resource_version, rows["b"].spec, rows["b"].updated_at) == ("20", {"size": 3}, before["b"])
    assert rows["c"].key == "cache.example.com/v1alpha1/memcacheds/default/m-c"
    assert rows["c"].labels == {"app": "memcached"}
    assert not any(r.deleted for r in rows.values())
    recording.resource_mirror_write([(KIND, api_object("c", "5", size=7))])
    assert Resource.objects.get(uid="c").spec == {"size": 3}  # the same version again changes nothing


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_mirror_writers_with_overlapping_batches_never_deadlock():
    uids = [f"o{i:02d}" for i in range(40)]
    errors: list[BaseException] = []

    def write(order: list[str], base: int) -> None:
        try:
            for step in range(10):
                recording.resource_mirror_write([(KIND, api_object(u, str(base + step))) for u in order])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(uids, 100)), threading.Thread(target=write, args=(uids[::-1], 200))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and Resource.objects.count() == 40
    assert set(Resource.objects.values_list("resource_version", flat=True)) == {"209"}


def test_the_state_read_with_the_head_is_the_plain_read_plus_the_head():
    created("u1")
    record_with_head(observed("u1"), "Running")
    Resource.objects.filter(uid="u1").update(active_anomalies={"flapping": {"message": "3 flips"}}, suspended=True,
                                             suspension={"actor": "user:ann", "reason": "maintenance"})
    plain, with_head = resource_state("u1"), resource_state("u1", head=True)
    assert plain is not None and with_head is not None and plain.head is None
    assert (with_head.id, with_head.phase, with_head.generation, with_head.suspended, with_head.suspension,
            with_head.rollback, with_head.active_anomalies) == (plain.id, plain.phase, plain.generation,
                                                                plain.suspended, plain.suspension, plain.rollback,
                                                                plain.active_anomalies)
    r = Resource.objects.get(uid="u1")
    head = with_head.head
    assert (head.phase, head.last_transition_seq, head.last_transition_hash, head.last_revision_seq) == (
        "Running", 2, r.last_transition_hash, 1)
    assert (head.revision_generation, head.rollback_none, head.deleted, head.phase_since) == (1, True, False,
                                                                                              r.phase_since)
    assert resource_state("nobody", head=True) is None


@postgres_only
def test_appended_rows_are_one_insert_that_skips_what_is_on_record(django_assert_num_queries):
    from datetime import UTC, datetime

    from reconcilers.engine.recording_sql import insert_rows
    from reconcilers.models import KubeEvent

    created("u1")
    rid = Resource.objects.get(uid="u1").id
    at = datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)

    def event(uid: str, count: int, message: str = "m") -> KubeEvent:
        return KubeEvent(resource_id=rid, event_uid=uid, count=count, name=f"e-{uid}", reason="BackOff",
                         message=message, type="Warning", last_timestamp=at, observed_at=at)

    with django_assert_num_queries(1):
        insert_rows([event("a", 1, "it's \"quoted\" \\ and ünïcode"), event("b", 1)])
    insert_rows([event("a", 1, "again"), event("a", 2)])  # (a, 1) is on record: skipped
    rows = list(KubeEvent.objects.order_by("event_uid", "count").values_list("event_uid", "count", "message",
                                                                             "last_timestamp"))
    assert rows == [("a", 1, "it's \"quoted\" \\ and ünïcode", at), ("a", 2, "m", at), ("b", 1, "m", at)]


def test_lookups_by_key_are_one_query_with_the_keys_as_one_parameter(django_assert_num_queries):
    """pairs_by_key: the same answer as the ORM's `IN` query (on every database), in one query whose text does not
    grow with the keys on PostgreSQL."""
    from datetime import UTC, datetime

    from reconcilers.engine.recording_sql import pairs_by_key
    from reconcilers.models import KubeEvent

    for uid in ("u1", "u2", "u3"):
        created(uid)
    ids = dict(Resource.objects.values_list("uid", "id"))
    at = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    KubeEvent.objects.bulk_create([
        KubeEvent(resource_id=ids["u1"], event_uid=uid, count=count, name=f"e-{uid}", reason="BackOff", message="m",
                  type="Warning", last_timestamp=at, observed_at=at)
        for uid, count in (("a", 1), ("a", 3), ("a", 2), ("b", 1))])
    wanted = ["u1", "u3", "nobody", *(f"x{i}" for i in range(300))]
    with django_assert_num_queries(1) as captured:
        assert pairs_by_key(Resource, "uid", "id", wanted) == {"u1": ids["u1"], "u3": ids["u3"]}
    if connection.vendor == "postgresql":
        assert "x299" not in captured.captured_queries[0]["sql"]  # one array parameter, not a literal per key
    assert pairs_by_key(KubeEvent, "event_uid", "count", {"a", "b", "c"}, greatest=True) == {"a": 3, "b": 1}
    assert pairs_by_key(Resource, "uid", "id", []) == {}


def test_a_row_s_json_is_each_column_as_save_prepares_it(monkeypatch) -> None:
    """`json_row` (its field plan found once per model) gives what `pre_save` + `json_value` give for every
    column: auto_now and auto_now_add dates filled in, an unset primary key left out unless named."""
    from datetime import UTC, datetime

    from django.utils import timezone

    from reconcilers.engine.sqljson import json_row, json_value

    monkeypatch.setattr(timezone, "now", lambda: datetime(2026, 12, 2, tzinfo=UTC))  # auto_now: one instant
    resource = recording.new_resource(KIND, "uid-json", "ns", "name")
    resource.phase_since = datetime(2026, 12, 1, tzinfo=UTC)
    run = ReconcileRun(key="k", kind="Memcached", started_at=datetime(2026, 12, 1, tzinfo=UTC),
                       duration_seconds=0.5, result="success", attempt=1, worker="w", trace_id="t")
    for row in (resource, run, Transition(resource_uid="uid-json", seq=1, from_phase="", to_phase="Pending")):
        expected = {f.column: json_value(f, f.pre_save(row, True)) for f in row._meta.concrete_fields
                    if not (f.primary_key and f.value_from_object(row) is None)}
        assert json_row(row) == expected and "id" not in expected
    assert json_row(resource)["created_at"] == "2026-12-02T00:00:00+00:00"  # auto_now_add, as save() fills it
    assert json_row(resource, ["id", "phase"]) == {"id": None, "phase": resource.phase}
