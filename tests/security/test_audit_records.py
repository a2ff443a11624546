"""Issue 20: action records form one verified hash chain; a reconcile request's identity is hashed at creation,
verified, and (PostgreSQL) guarded by a trigger."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from reconcilers.engine.audit import record_verify
from reconcilers.models import ActionRecord, ReconcileRequest, RequestState
from tests.reconcilers.audit_support import tamper

pytestmark = pytest.mark.django_db
postgres_only = pytest.mark.skipif("connection.vendor != 'postgresql'", reason="triggers are PostgreSQL's")


def _actions(n: int) -> list[ActionRecord]:
    return [ActionRecord.objects.create(actor="alice", action="resource.reconcile", method="POST", path=f"/p/{i}",
                                        target=f"k/{i}", outcome="allowed", status_code=202, detail={"i": i, "z": [1]})
            for i in range(n)]


def _as_owner(statements):
    """Run SQL with the action record's and the requests' triggers disabled too (as a database owner could)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for table in ("accounts_actionrecord", "reconcilers_reconcilerequest"):
                cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER ALL")
        try:
            tamper(statements)
        finally:
            if connection.vendor == "postgresql":
                for table in ("accounts_actionrecord", "reconcilers_reconcilerequest"):
                    cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER ALL")


def _request(**kw) -> ReconcileRequest:
    return ReconcileRequest.objects.create(key="g/v1/things/default/a", token="t1", actor="user:alice",
                                           reason="because", **kw)


def test_action_records_are_chained_and_verify():
    rows = _actions(3)
    assert [r.seq for r in rows] == [1, 2, 3]
    assert rows[0].prev_hash == "" and rows[1].prev_hash == rows[0].hash and rows[2].prev_hash == rows[1].hash
    assert record_verify() == []
    call_command("audit_verify")


@pytest.mark.parametrize("attack, problem", [
    ("UPDATE accounts_actionrecord SET actor = 'mallory' WHERE seq = 2", "edited"),
    ("UPDATE accounts_actionrecord SET detail = '{\"i\": 9, \"z\": [1]}' WHERE seq = 2", "edited"),
    ("DELETE FROM accounts_actionrecord WHERE seq = 2", "removed"),
])
def test_a_tampered_action_record_is_named(attack, problem):
    _actions(3)
    _as_owner([attack])
    (found,) = record_verify()
    assert (found.record, found.problem) == ("action", problem) and found.ident.startswith(
        "seq=3" if problem == "removed" else "seq=2")
    with pytest.raises(CommandError, match=f"action seq=.* \\({problem}\\)"):
        call_command("audit_verify")


def test_a_request_identity_is_hashed_and_its_lifecycle_may_change():
    request = _request()
    assert len(request.identity_hash) == 64
    ReconcileRequest.objects.filter(pk=request.pk).update(state=RequestState.SUCCEEDED, error="", trace_id="ab")
    assert record_verify() == []


@pytest.mark.parametrize("column, value", [("actor", "user:mallory"), ("reason", "x"), ("token", "t2"),
                                           ("key", "g/v1/things/other/b")])
def test_a_rewritten_request_identity_is_named(column, value):
    request = _request()
    pk = str(request.pk) if connection.vendor == "postgresql" else request.pk.hex
    _as_owner([(f"UPDATE reconcilers_reconcilerequest SET {column} = %s WHERE id = %s", (value, pk))])
    (found,) = record_verify()
    assert (found.record, found.problem) == ("request", "edited") and str(request.pk) in found.ident
    with pytest.raises(CommandError, match="request id="):
        call_command("audit_verify")


@postgres_only
@pytest.mark.parametrize("sql", [
    "UPDATE reconcilers_reconcilerequest SET actor = 'user:mallory'",
    "UPDATE reconcilers_reconcilerequest SET requested_at = now()",
    "DELETE FROM reconcilers_reconcilerequest",
    "TRUNCATE reconcilers_reconcilerequest CASCADE",
])
def test_the_request_trigger_refuses_identity_updates_deletes_and_truncate(sql):
    _request()
    with pytest.raises(DatabaseError, match="refused"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SET LOCAL opsconsole.test_flush = 'off'")
        cursor.execute(sql)
    assert ReconcileRequest.objects.get().actor == "user:alice"


def test_the_consoles_full_verification_checks_the_action_record_too():
    """The console's "Verify" (admins) runs what audit_verify runs, not only the transition chains; a limited
    caller does not see a problem of the whole record."""
    from reconcilers.services.audit_status import audit_chain_status

    _actions(3)
    assert audit_chain_status(refresh=True).ok
    _as_owner(["UPDATE accounts_actionrecord SET actor = 'mallory' WHERE seq = 2"])
    status = audit_chain_status(refresh=True)
    assert not status.ok and any("action" in text and "edited" in text for text in status.breaks), status.breaks
    assert audit_chain_status(namespaces=frozenset({"team-a"})).ok
