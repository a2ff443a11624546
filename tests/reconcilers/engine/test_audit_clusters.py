"""Issue 41, the record side: every row the engine records carries its object's cluster, and hash format 3 covers
it. The same group/kind/namespace/name in two clusters (`default` and `b`, two uids) makes two chains that both
verify; a v3 link whose cluster is changed behind the ORM is reported; links written in format 2 keep verifying."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction  # noqa: F401 - the skipif reads connection

from reconcilers.engine.annotation_requests import annotation_request_ensure
from reconcilers.engine.audit import (
    HASH_VERSION,
    HEALING,
    REVISION,
    TRANSITION,
    chain_verify,
    healing_fields,
    healing_hash,
    revision_fields,
    revision_hash,
    row_fields,
    transition_hash,
)
from reconcilers.engine.healing import records
from reconcilers.engine.recording import PhaseChange, reconcile_record
from reconcilers.models import (
    ActionRecord,
    Anomaly,
    HealingAction,
    HealingRecord,
    KubeEvent,
    ReconcileRequest,
    ReconcileRun,
    Resource,
    SpecRevision,
    Transition,
)
from tests.reconcilers.audit_support import KIND, MACHINE, observed, run_for, tamper

pytestmark = pytest.mark.django_db

LOCAL_KEY = "cache.example.com/v1alpha1/memcacheds/default/m"
B_KEY = f"b/{LOCAL_KEY}"
UIDS = {"default": "uid-default", "b": "uid-b"}
TABLES = {TRANSITION: Transition, REVISION: SpecRevision, HEALING: HealingRecord}


def live_of(obj: Any) -> dict[str, Any]:
    """The live object the API returned for `obj` (a spec writer named in managedFields)."""
    return {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
            "metadata": {"uid": obj.uid, "name": obj.name, "namespace": obj.namespace, "generation": obj.generation,
                         "resourceVersion": obj.resource_version,
                         "managedFields": [{"manager": "kubectl", "operation": "Update", "time": "2026-12-01T10:00:00Z",
                                            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:size": {}}}}]},
            "spec": obj.spec, "status": obj.status}


def run_in(cluster: str, to_phase: str | None, **changes: Any) -> Any:
    """One reconcile of `m` in `cluster` (its own uid, the key of its cluster) moving it to `to_phase`."""
    obj = observed(UIDS[cluster], name="m", cluster=cluster, **changes)
    change = PhaseChange(to_phase, "Reconciled", f"now {to_phase}") if to_phase else None
    return reconcile_record(run_for(obj, key=B_KEY if cluster == "b" else LOCAL_KEY), obj, change, MACHINE,
                            live=live_of(obj))


def healing_in(cluster: str, **fields: Any) -> HealingRecord:
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(uid=UIDS[cluster])
        made = records.healing_append(row, HealingAction.ANOMALY_DETECTED, actor="controller", **fields)
        row.save()
    return made


@pytest.fixture
def two_chains() -> dict[str, Resource]:
    """`m` in both clusters, each with every link kind: a revision, transitions, a healing record."""
    for cluster, key in (("default", LOCAL_KEY), ("b", B_KEY)):  # the mirror rows, as each controller makes them
        Resource.objects.create(uid=UIDS[cluster], cluster=cluster, key=key, group=KIND.group, version=KIND.version,
                                plural=KIND.plural, kind=KIND.kind, namespace="default", name="m")
    for cluster in ("default", "b"):
        run_in(cluster, "Pending")
        healing_in(cluster, rule="backoff", reason="3 events")
        run_in(cluster, "Running")
    return {cluster: Resource.objects.get(uid=uid) for cluster, uid in UIDS.items()}


def test_the_same_name_in_two_clusters_makes_two_chains_that_both_verify(two_chains):
    assert {c: (r.cluster, r.key, r.kind, r.namespace, r.name) for c, r in two_chains.items()} == {
        "default": ("default", LOCAL_KEY, "Memcached", "default", "m"),
        "b": ("b", B_KEY, "Memcached", "default", "m")}
    report = chain_verify()
    assert report.ok, [b.describe() for b in report.breaks]
    assert (report.chains, report.transitions, report.revisions, report.healing) == (2, 4, 2, 2)
    assert chain_verify(UIDS["b"]).ok and chain_verify(UIDS["default"]).ok
    assert two_chains["default"].last_transition_hash != two_chains["b"].last_transition_hash


def test_every_row_recorded_for_the_b_object_carries_cluster_b_and_links_format_3(two_chains):
    for cluster, uid in UIDS.items():
        for name, model in TABLES.items():
            rows = list(model.objects.filter(resource_uid=uid).values_list("cluster", "hash_version"))
            assert rows and set(rows) == {(cluster, HASH_VERSION)}, (cluster, name, rows)
        assert set(ReconcileRun.objects.filter(resource__uid=uid).values_list("cluster", flat=True)) == {cluster}
    assert HASH_VERSION == 3
    # a refused change: its anomaly is the b object's too
    outcome = run_in("b", "Pending")  # Running -> Pending is allowed; Pending -> Deleted is not
    assert outcome.transition_ids
    refused = run_in("b", "Deleted")
    anomaly = Anomaly.objects.get(id=refused.anomaly_id)
    assert (anomaly.cluster, anomaly.resource.uid) == ("b", UIDS["b"])
    assert ReconcileRun.objects.get(id=refused.run_id).cluster == "b"


def test_a_run_without_its_object_is_recorded_in_its_keys_cluster():
    from reconcilers.engine.recording import run_record_unobserved

    run_id = run_record_unobserved(run_for(observed("gone", name="m"), key=B_KEY, result="error"))
    assert ReconcileRun.objects.get(id=run_id).cluster == "b"


def test_the_hash_of_a_v3_link_covers_its_cluster(two_chains):
    for name, model in TABLES.items():
        row = model.objects.filter(resource_uid=UIDS["b"]).order_by("seq").first()
        hash_of, fields_of = {TRANSITION: (transition_hash, row_fields), REVISION: (revision_hash, revision_fields),
                              HEALING: (healing_hash, healing_fields)}[name]
        fields = fields_of(row)
        assert fields["cluster"] == "b" and hash_of(fields, row.prev_hash) == row.hash, name
        assert hash_of(dict(fields, cluster="default"), row.prev_hash) != row.hash, name


@pytest.mark.parametrize("item", [TRANSITION, REVISION, HEALING])
def test_a_v3_link_whose_cluster_was_changed_behind_the_orm_is_reported(two_chains, item, capsys):
    model = TABLES[item]
    row = model.objects.filter(resource_uid=UIDS["b"]).order_by("seq").first()
    tamper([(f"UPDATE {model._meta.db_table} SET cluster = %s WHERE id = %s", ("default", row.id))])
    report = chain_verify()
    (found,) = report.breaks
    assert (found.resource_uid, found.item, found.transition_id) == (UIDS["b"], item, row.id)
    assert found.problem in ("edited", "moved") and "default" in found.detail
    with pytest.raises(CommandError, match=f"resource={UIDS['b']}"):
        call_command("audit_verify")
    assert f"id={row.id}" in capsys.readouterr().err


def _rehash(uid: str, version: int) -> None:
    """Rewrite `uid`'s whole chain in hash format `version` (as rows written before migration 0021 are), head
    included, behind the ORM."""
    links = sorted(
        [(r.chain_after if hasattr(r, "chain_after") else r.seq, *((r.revision_after, 1) if isinstance(
            r, HealingRecord) else (r.seq, 0) if isinstance(r, SpecRevision) else (-1, 0)), r.id, r)
         for model in TABLES.values() for r in model.objects.filter(resource_uid=uid)],
        key=lambda t: t[:4])
    prev, statements = "", []
    for *_order, row in links:
        row.hash_version = version
        if isinstance(row, Transition):
            digest = transition_hash(row_fields(row), prev)
        elif isinstance(row, SpecRevision):
            digest = revision_hash(revision_fields(row), prev)
        else:
            digest = healing_hash(healing_fields(row), prev)
        statements.append((f"UPDATE {row._meta.db_table} SET hash_version = %s, prev_hash = %s, hash = %s "
                           "WHERE id = %s", (version, prev, digest, row.id)))
        prev = digest
    tamper(statements)
    Resource.objects.filter(uid=uid).update(last_transition_hash=prev)


def test_links_written_in_format_2_keep_verifying_and_a_chain_grows_on_them_in_format_3(two_chains):
    _rehash(UIDS["default"], 2)
    assert chain_verify().ok
    assert set(Transition.objects.filter(resource_uid=UIDS["default"]).values_list("hash_version", flat=True)) == {2}
    run_in("default", "Degraded")  # appended in format 3 onto a format 2 head
    healing_in("default", rule="flapping")
    versions = list(Transition.objects.filter(resource_uid=UIDS["default"]).order_by("seq")
                    .values_list("hash_version", flat=True))
    assert versions == [2, 2, 3]
    assert chain_verify().ok
    # a format 2 row's cluster is not in its hash; an edit of its other fields still is
    first = Transition.objects.get(resource_uid=UIDS["default"], seq=1)
    tamper([("UPDATE reconcilers_transition SET reason = %s WHERE id = %s", ("Forged", first.id))])
    (found,) = chain_verify().breaks
    assert (found.transition_id, found.problem) == (first.id, "edited")


def test_a_format_2_link_moved_into_another_cluster_is_named_moved(two_chains):
    _rehash(UIDS["default"], 2)
    row = Transition.objects.get(resource_uid=UIDS["default"], seq=1)
    tamper([("UPDATE reconcilers_transition SET cluster = %s WHERE id = %s", ("b", row.id))])
    (found,) = chain_verify().breaks
    assert (found.transition_id, found.problem) == (row.id, "moved")
    assert "cluster b" in found.detail and "default" in found.detail


def test_a_manual_request_and_its_action_record_are_in_the_clusters_of_their_resource(two_chains):
    obj = {"metadata": {"uid": UIDS["b"], "name": "m", "namespace": "default",
                        "annotations": {"opsconsole.io/reconcile-requested-at": "t-1"}}}
    request = annotation_request_ensure(B_KEY, obj, "opsconsole.io/reconcile-requested-at", "t-1")
    assert request is not None
    assert (ReconcileRequest.objects.get(pk=request.pk).cluster, request.resource_id) == ("b", two_chains["b"].id)
    action = ActionRecord.objects.get(target=B_KEY)
    assert (action.cluster, action.action) == ("b", "resource.reconcile")


def test_the_key_kind_of_the_b_resource_keeps_its_cluster_prefix_as_the_mirror_refreshes_it(two_chains):
    run_in("b", None, resource_version="100000")
    assert Resource.objects.get(uid=UIDS["b"]).key == B_KEY
    assert KIND.request("default", "m").key() == LOCAL_KEY


def test_an_archived_event_is_in_the_cluster_of_the_object_it_is_filed_under(two_chains):
    from reconcilers.engine.healing.archive import OwnerResolver, events_archive

    def event(uid: str, about: str) -> dict[str, Any]:
        return {"metadata": {"uid": uid, "name": f"m.{uid}", "namespace": "default",
                             "creationTimestamp": "2026-01-01T00:00:00Z"},
                "involvedObject": {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "m",
                                   "namespace": "default", "uid": about},
                "type": "Warning", "reason": "Failed", "message": "x", "count": 1,
                "lastTimestamp": "2026-01-01T00:00:01Z"}

    resolver = OwnerResolver(None, get=lambda ref: None)
    batch = [(event("ev-b", UIDS["b"]), None), (event("ev-default", UIDS["default"]), None)]
    assert events_archive(batch, resolver) == 2
    assert dict(KubeEvent.objects.values_list("event_uid", "cluster")) == {"ev-b": "b", "ev-default": "default"}


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="the one-statement path is PostgreSQL's")
def test_the_one_statement_record_writes_the_b_objects_run_and_links_in_cluster_b(two_chains):
    from reconcilers.engine.healing.state import resource_state
    from reconcilers.engine.recording_sql import reconcile_record_one_statement

    obj = observed(UIDS["b"], name="m", cluster="b")
    state = resource_state(UIDS["b"], head=True)
    assert state is not None and state.head is not None
    outcome = reconcile_record_one_statement(run_for(obj, key=B_KEY), obj, PhaseChange("Degraded", "Probe", "down"),
                                             MACHINE, state.head, live=live_of(obj), moves=[])
    assert outcome is not None and outcome.transition_ids
    row = Transition.objects.get(id=outcome.transition_ids[0])
    assert (row.cluster, row.hash_version, ReconcileRun.objects.get(id=outcome.run_id).cluster) == ("b", 3, "b")
    assert chain_verify().ok


def test_an_action_records_cluster_is_covered_by_the_action_chain_and_default_records_hash_as_before():
    from reconcilers.engine.audit import actions_verify
    from reconcilers.models.chain import ACTION_HASHED_FIELDS, action_hash, encode

    made = [ActionRecord.objects.create(action="resource.reconcile", cluster=cluster, method="POST", path="/",
                                        target=key, outcome="allowed", status_code=202)
            for cluster, key in (("default", LOCAL_KEY), ("b", B_KEY), ("default", LOCAL_KEY))]
    assert actions_verify() == []
    # a default cluster's record hashes in format 1, as every record before clusters did
    first = made[0]
    fields = {name: getattr(first, name) for name in ACTION_HASHED_FIELDS}
    assert first.hash == hashlib.sha256(encode(fields, ACTION_HASHED_FIELDS, "action", "")).hexdigest()
    assert action_hash(dict(fields), "") == first.hash  # a row read before the column existed names no cluster
    assert made[1].hash != action_hash({**{n: getattr(made[1], n) for n in ACTION_HASHED_FIELDS},
                                        "cluster": "default"}, made[1].prev_hash)
    for row, other in ((made[1], "default"), (made[2], "b")):
        tamper([("UPDATE accounts_actionrecord SET cluster = %s WHERE id = %s", (other, row.id))])
        (problem,) = actions_verify()
        assert (problem.ident, problem.problem) == (f"seq={row.seq} id={row.id}", "edited")
        tamper([("UPDATE accounts_actionrecord SET cluster = %s WHERE id = %s", (row.cluster, row.id))])
    assert actions_verify() == []
