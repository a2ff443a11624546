"""Issue 20: every append-only table refuses UPDATE, DELETE and TRUNCATE (CASCADE included) on PostgreSQL,
and Anomaly rows are append-only in the ORM too."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from reconcilers.models import ActionRecord, Anomaly, AppendOnlyError, Resource
from tests.reconcilers.audit_support import observed, record

pytestmark = pytest.mark.django_db

APPEND_ONLY = ("reconcilers_transition", "reconcilers_reconcilerun", "reconcilers_specrevision",
               "reconcilers_anomaly", "accounts_actionrecord")
postgres_only = pytest.mark.skipif("connection.vendor != 'postgresql'", reason="triggers are PostgreSQL's")


def _refused(sql: str) -> str:
    """Run `sql` in a savepoint as an ordinary session (no test flush allowance); the error it raised."""
    with pytest.raises(DatabaseError) as caught, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SET LOCAL opsconsole.test_flush = 'off'")
        cursor.execute(sql)
    return str(caught.value)


@postgres_only
@pytest.mark.parametrize("table", APPEND_ONLY)
@pytest.mark.parametrize("cascade", ["", " CASCADE"], ids=["plain", "cascade"])
def test_truncate_is_refused(table, cascade):
    record(observed("u-trunc"), "Pending")
    record(observed("u-trunc"), "Deleted")  # refused by the machine: an anomaly
    ActionRecord.objects.create(action="test", method="POST", path="/", outcome="allowed", status_code=200)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        before = cursor.fetchone()[0]
    error = _refused(f"TRUNCATE {table}{cascade}")
    # CASCADE reaches the trigger; a plain TRUNCATE of a referenced table may be stopped by its foreign keys first
    assert "TRUNCATE refused" in error or (not cascade and "foreign key" in error)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        assert cursor.fetchone()[0] == before


@postgres_only
def test_truncating_the_resources_cascade_is_refused():
    record(observed("u-trunc2"), "Pending")
    assert "TRUNCATE refused" in _refused("TRUNCATE reconcilers_resource CASCADE")
    assert Resource.objects.filter(uid="u-trunc2").exists()


@postgres_only
@pytest.mark.parametrize("sql", ["UPDATE reconcilers_anomaly SET reason = 'x'", "DELETE FROM reconcilers_anomaly"])
def test_anomaly_update_and_delete_are_refused_in_sql(sql):
    record(observed("u-anom"), "Pending")
    record(observed("u-anom"), "Deleted")  # refused by the machine: an anomaly
    assert Anomaly.objects.count() == 1
    assert "append-only" in _refused(sql)


def test_anomaly_is_append_only_in_the_orm():
    record(observed("u-anom2"), "Pending")
    record(observed("u-anom2"), "Deleted")
    anomaly = Anomaly.objects.get()
    with pytest.raises(AppendOnlyError):
        anomaly.save()
    with pytest.raises(AppendOnlyError):
        Anomaly.objects.all().delete()
    with pytest.raises(AppendOnlyError):
        Anomaly.objects.update(reason="x")


@pytest.mark.django_db(transaction=True)
def test_the_test_flush_still_empties_the_tables_after_a_transactional_test():
    record(observed("u-flush"), "Pending")
    ActionRecord.objects.create(action="test", method="POST", path="/", outcome="allowed", status_code=200)
    assert Resource.objects.filter(uid="u-flush").exists()  # the teardown flush (TRUNCATE) must succeed


@pytest.mark.django_db(transaction=True)
def test_and_the_tables_start_empty_after_it():
    # the rows the test before wrote are gone (not "every table empty": another test's engine process sharing this
    # worker's database may record a row late, which is not what the flush is asked here)
    assert not Resource.objects.filter(uid="u-flush").exists()
    assert not ActionRecord.objects.filter(action="test", method="POST", path="/").exists()
