"""The engine's models: Transition and ReconcileRun are append-only in the ORM and, on PostgreSQL, in the
database; constraints the recording relies on hold in the database."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import ProtectedError

from reconcilers.models import AppendOnlyError, ReconcileRequest, ReconcileRun, Resource, Transition
from tests.reconcilers.audit_support import observed, record

pytestmark = pytest.mark.django_db

APPEND_ONLY_TABLES = {Transition: "reconcilers_transition", ReconcileRun: "reconcilers_reconcilerun"}


@pytest.fixture
def rows() -> dict[type, object]:
    """One stored Transition and one stored ReconcileRun."""
    outcome = record(observed("uid-models"), "Pending")
    return {
        Transition: Transition.objects.get(id=outcome.transition_ids[0]),
        ReconcileRun: ReconcileRun.objects.get(id=outcome.run_id),
    }


@pytest.mark.parametrize("model", [Transition, ReconcileRun], ids=lambda m: m.__name__)
class TestTheOrmRefusesChangesToAppendOnlyRows:
    def test_saving_a_stored_row_is_refused(self, rows, model):
        row = rows[model]
        with pytest.raises(AppendOnlyError, match="append-only"):
            row.save()
        with pytest.raises(AppendOnlyError):
            row.save(update_fields=["trace_id"])

    def test_deleting_a_row_is_refused(self, rows, model):
        with pytest.raises(AppendOnlyError, match="delete"):
            rows[model].delete()
        assert model.objects.filter(id=rows[model].id).exists()

    def test_queryset_update_is_refused(self, rows, model):
        with pytest.raises(AppendOnlyError, match="update"):
            model.objects.filter(id=rows[model].id).update(trace_id="forged")
        with pytest.raises(AppendOnlyError):
            model.objects.all().update(trace_id="forged")
        assert model.objects.get(id=rows[model].id).trace_id == "ab" * 16

    def test_queryset_delete_is_refused(self, rows, model):
        with pytest.raises(AppendOnlyError, match="delete"):
            model.objects.filter(id=rows[model].id).delete()
        with pytest.raises(AppendOnlyError):
            model.objects.all().delete()
        assert model.objects.count() == 1

    def test_bulk_update_update_or_create_and_the_base_manager_are_refused(self, rows, model):
        row = rows[model]
        row.trace_id = "forged"
        with pytest.raises(AppendOnlyError):
            model.objects.bulk_update([row], ["trace_id"])
        with pytest.raises(AppendOnlyError):
            model.objects.update_or_create(id=row.id, defaults={"trace_id": "forged"})
        with pytest.raises(AppendOnlyError):
            model._base_manager.filter(id=row.id).update(trace_id="forged")
        with pytest.raises(AppendOnlyError):
            model._base_manager.filter(id=row.id).delete()
        assert model.objects.get(id=row.id).trace_id == "ab" * 16


def test_new_rows_can_still_be_appended(rows):
    run = rows[ReconcileRun]
    copy = ReconcileRun.objects.create(
        key=run.key, kind=run.kind, started_at=datetime.now(UTC), duration_seconds=0.5, result="requeue"
    )
    assert ReconcileRun.objects.filter(id__in=[run.id, copy.id]).count() == 2


def test_deleting_a_resource_with_audit_rows_is_refused(rows):
    with pytest.raises(ProtectedError):
        Resource.objects.get(uid="uid-models").delete()
    assert Transition.objects.filter(resource_uid="uid-models").count() == 1


def test_the_append_only_trigger_exists_on_postgresql_only_and_refuses_raw_update_and_delete(rows):
    if connection.vendor != "postgresql":
        # SQLite: no append-only trigger (the ORM and audit_verify are the guards there); the only triggers are
        # the maintained counts' (migration 0015), which refuse nothing
        with connection.cursor() as cursor:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
            assert [name for (name,) in cursor.fetchall()] == [
                "reconcilers_resource_count", "reconcilers_resource_count_moved", "reconcilers_transition_count"]
        return
    for model, table in APPEND_ONLY_TABLES.items():
        row_id = rows[model].id
        for sql in (f"UPDATE {table} SET trace_id = 'forged' WHERE id = %s", f"DELETE FROM {table} WHERE id = %s"):
            with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(sql, [row_id])
        assert model.objects.get(id=row_id).trace_id == "ab" * 16


def test_truncate_is_let_through_only_for_the_test_flush_on_postgresql(rows):
    """Migration 0006 refuses TRUNCATE, except for Django's flush in a `test_` database whose sessions say
    `opsconsole.test_flush = 'on'` (tests/security/test_audit_append_only.py: refused otherwise)."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM reconcilers_transition")  # no trigger on SQLite
        assert Transition.objects.count() == 0
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'reconcilers_transition'::regclass AND NOT tgisinternal"
        )
        assert sorted(name for (name,) in cursor.fetchall()) == [  # _count: the maintained counts (0015)
            "reconcilers_transition_append_only", "reconcilers_transition_count", "reconcilers_transition_no_truncate"]
        cursor.execute("SHOW opsconsole.test_flush")
        assert cursor.fetchone()[0] == "on"
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # fire the deferred FK checks of the fixture's inserts
        cursor.execute("TRUNCATE reconcilers_transition CASCADE")
    assert Transition.objects.count() == 0


def test_the_database_refuses_a_second_row_with_the_same_seq_for_a_resource(rows):
    row = rows[Transition]
    duplicate = Transition(
        resource_id=row.resource_id, resource_uid=row.resource_uid, kind=row.kind, name=row.name, seq=row.seq,
        to_phase="Running", hash="0" * 64,
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        duplicate.save()


def test_the_database_refuses_an_actor_that_is_neither_the_controller_nor_a_user(rows):
    row = rows[Transition]
    forged = Transition(
        resource_id=row.resource_id, resource_uid=row.resource_uid, kind=row.kind, name=row.name, seq=2,
        to_phase="Running", hash="0" * 64, actor="someone",
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        forged.save()


def test_an_idempotency_key_is_unique_per_actor_and_a_blank_one_is_not_constrained():
    common = dict(key="k", token="t1", reason="why")
    ReconcileRequest.objects.create(actor="user:ann", idempotency_key="abc", **common)
    ReconcileRequest.objects.create(actor="user:bob", idempotency_key="abc", **common)
    ReconcileRequest.objects.create(actor="user:ann", idempotency_key="", **common)
    ReconcileRequest.objects.create(actor="user:ann", idempotency_key="", **common)
    with pytest.raises(IntegrityError), transaction.atomic():
        ReconcileRequest.objects.create(actor="user:ann", idempotency_key="abc", **common)
    assert ReconcileRequest.objects.count() == 4
    assert ReconcileRequest.objects.first().state == "requested"


def test_the_admin_lists_every_engine_table_read_only(admin_client, rows):
    for name in ("resource", "transition", "anomaly", "reconcilerun", "reconcilerequest", "span"):
        assert admin_client.get(f"/admin/reconcilers/{name}/").status_code == 200
        assert admin_client.get(f"/admin/reconcilers/{name}/add/").status_code == 403
    row = rows[Transition]
    page = admin_client.get(f"/admin/reconcilers/transition/{row.id}/change/")
    assert page.status_code == 200 and b"Save" not in page.content and row.hash.encode() in page.content
    assert admin_client.post(f"/admin/reconcilers/transition/{row.id}/delete/").status_code == 403


@pytest.mark.django_db(transaction=True)
def test_the_default_cluster_is_registered_after_migrate_and_after_a_flush():
    from django.core.management import call_command

    from reconcilers.models import Cluster

    assert Cluster.objects.filter(name="default").exists()
    call_command("flush", "--no-input", verbosity=0)
    assert list(Cluster.objects.values_list("name", flat=True)) == ["default"]
