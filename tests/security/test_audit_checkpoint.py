"""Issue 20: signed checkpoints anchor the record's heads outside the database. Each tampering an owner of the
database can do behind the ORM (triggers disabled) that the chains alone cannot see is named by audit_verify
against the newest checkpoint; a clean record verifies; a forged checkpoint is named."""

from __future__ import annotations

import json
import stat

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from opsconsole.accounts.models import ActionRecord
from reconcilers.engine import checkpoint
from reconcilers.engine.audit import chain_verify, record_verify, row_fields, transition_hash
from reconcilers.models import ReconcileRequest, Resource, Transition
from tests.reconcilers.audit_support import record_phases

pytestmark = pytest.mark.django_db
TABLES = ("reconcilers_transition", "reconcilers_reconcilerun", "reconcilers_specrevision", "reconcilers_anomaly",
          "reconcilers_reconcilerequest", "accounts_actionrecord", "reconcilers_resource")


@pytest.fixture(autouse=True)
def keys(settings, tmp_path):
    settings.OPSCONSOLE_AUDIT_KEY_FILE = str(tmp_path / "keys" / "audit-signing.key")
    settings.OPSCONSOLE_AUDIT_CHECKPOINT_DIR = str(tmp_path / "checkpoints")
    return tmp_path


@pytest.fixture
def recorded():
    record_phases("uid-a", ["Pending", "Running", "Degraded"])
    record_phases("uid-b", ["Pending"])
    for i in range(3):
        ActionRecord.objects.create(actor="alice", action="resource.reconcile", method="POST", path=f"/{i}",
                                    outcome="allowed", status_code=202)
    ReconcileRequest.objects.create(key="k", token="t", actor="user:alice", reason="r")
    return checkpoint.checkpoint_write()


def as_owner(*statements):
    """SQL behind the ORM with every trigger of the record's tables disabled, as the database's owner could."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for table in TABLES:
                cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER ALL")
        try:
            for statement in statements:
                sql, params = (statement, ()) if isinstance(statement, str) else statement
                cursor.execute(sql, params)
        finally:
            if connection.vendor == "postgresql":
                for table in TABLES:
                    cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER ALL")


def problems() -> list[tuple[str, str]]:
    return [(p.ident, p.problem) for p in checkpoint.checkpoint_verify().problems]


def audit_verify_fails(match: str) -> str:
    """The chains alone may look intact; audit_verify as a whole names the problem."""
    import io

    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("audit_verify", stdout=io.StringIO(), stderr=err)
    assert match in err.getvalue(), err.getvalue()
    return err.getvalue()


def test_a_clean_record_verifies_and_the_key_and_files_are_as_documented(recorded, keys, capsys):
    doc = recorded.doc
    assert (doc["seq"], doc["tree_size"], doc["format"]) == (1, 2, 1)
    assert doc["counts"]["transitions"] == 4 and doc["actions"]["seq"] == 3
    assert stat.S_IMODE((keys / "keys" / "audit-signing.key").stat().st_mode) == 0o600
    assert recorded.path.name == "checkpoint-00000001.json" and json.loads(recorded.path.read_text()) == doc
    assert problems() == []
    record_phases("uid-a", ["Running"])  # the record grows after the checkpoint: still fine
    ActionRecord.objects.create(action="x", method="POST", path="/", outcome="allowed", status_code=200)
    assert problems() == []
    assert checkpoint.checkpoint_write().doc["seq"] == 2 and problems() == []
    call_command("audit_verify")
    assert "matches signed checkpoint 2" in capsys.readouterr().out


def test_a_forged_checkpoint_is_named(recorded):
    doc = json.loads(recorded.path.read_text())
    doc["counts"]["transitions"] = 0  # as someone covering a truncate would
    recorded.path.write_text(json.dumps(doc))
    assert problems() == [("1", "forged")]
    audit_verify_fails("checkpoint 1: forged: its signature is not the audit key's")


def test_a_checkpoint_signed_with_another_key_is_named(recorded, settings, tmp_path):
    settings.OPSCONSOLE_AUDIT_KEY_FILE = str(tmp_path / "other.key")
    checkpoint.checkpoint_write()  # a forger with a key of their own
    settings.OPSCONSOLE_AUDIT_KEY_FILE = str(tmp_path / "keys" / "audit-signing.key")
    assert problems() == [("2", "forged")]


def test_truncated_tables_with_reset_heads_are_named(recorded):
    wipe = "TRUNCATE {} CASCADE" if connection.vendor == "postgresql" else "DELETE FROM {}"
    as_owner(*(wipe.format(t) for t in ("reconcilers_reconcilerequest", "reconcilers_transition",
                                        "accounts_actionrecord")),
             "UPDATE reconcilers_resource SET last_transition_seq = 0, last_transition_hash = ''")
    assert chain_verify().ok and record_verify() == []  # the chains alone see nothing
    found = problems()
    assert ("1 table=transitions", "truncated") in found and ("1 table=actions", "truncated") in found
    assert ("1 table=reconcile_requests", "truncated") in found
    assert ("1 resource=uid-a", "removed") in found and ("1 resource=uid-b", "removed") in found
    audit_verify_fails("checkpoint 1 table=transitions: truncated: 0 rows now, the checkpoint counted 4")


def test_a_cut_tail_is_named(recorded):
    last, prev = Transition.objects.filter(resource_uid="uid-a").order_by("-seq")[:2]
    as_owner(("DELETE FROM reconcilers_transition WHERE id = %s", (last.id,)),
             ("UPDATE reconcilers_resource SET last_transition_seq = %s, last_transition_hash = %s WHERE uid = %s",
              (prev.seq, prev.hash, "uid-a")))
    assert chain_verify().ok
    assert ("1 resource=uid-a", "cut") in problems()
    audit_verify_fails("checkpoint 1 resource=uid-a: cut: Memcached default/m-uid-a: 2 transitions")


def test_a_zeroed_head_is_named(recorded):
    as_owner("UPDATE reconcilers_resource SET last_transition_seq = 0, last_transition_hash = '' WHERE uid = 'uid-b'")
    assert ("1 resource=uid-b", "zeroed") in problems()


def test_a_removed_resource_history_is_named(recorded):
    as_owner("DELETE FROM reconcilers_transition WHERE resource_uid = 'uid-b'",
             "UPDATE reconcilers_resource SET last_transition_seq = 0, last_transition_hash = '' WHERE uid = 'uid-b'")
    assert chain_verify().ok
    assert ("1 resource=uid-b", "removed") in problems()
    audit_verify_fails("resource=uid-b: removed: Memcached default/m-uid-b: its whole history is gone")


def test_a_history_rewritten_with_recomputed_hashes_is_named(recorded):
    prev, statements = "", []
    for row in Transition.objects.filter(resource_uid="uid-a").order_by("seq"):
        fields = dict(row_fields(row), reason="Rewritten")
        digest = transition_hash(fields, prev)
        statements.append(("UPDATE reconcilers_transition SET reason = 'Rewritten', prev_hash = %s, hash = %s "
                           "WHERE id = %s", (prev, digest, row.id)))
        prev = digest
    statements.append(("UPDATE reconcilers_resource SET last_transition_hash = %s WHERE uid = 'uid-a'", (prev,)))
    as_owner(*statements)
    assert chain_verify().ok  # unkeyed chains: a full rewrite is consistent
    assert problems() == [("1 resource=uid-a", "rewritten")]


def test_a_deleted_request_and_a_cut_action_record_are_named(recorded):
    as_owner("DELETE FROM reconcilers_reconcilerequest", "DELETE FROM accounts_actionrecord WHERE seq = 3")
    assert record_verify() == []  # the action chain's tail and a whole request row: only the checkpoint knows
    found = problems()
    assert ("1 table=reconcile_requests", "truncated") in found
    assert ("1 action seq=3", "cut") in found and ("1 table=actions", "removed") in found


def test_the_configmap_gets_the_signed_document(recorded, monkeypatch):
    sent = []
    monkeypatch.setattr(checkpoint.kube, "apply_object", lambda api, kind, ns, name, manifest, **kw: sent.append(
        (kind.kind, ns, name, manifest, kw)))
    written = checkpoint.checkpoint_write(api=object())
    ((kind, ns, name, manifest, kw),) = sent
    assert (kind, ns, name, kw["field_manager"]) == ("ConfigMap", "default", "opsconsole-audit-checkpoint",
                                                     "opsconsole-audit")
    published = json.loads(manifest["data"]["checkpoint.json"])
    assert "leaves" not in published and published["root"] == written.doc["root"] and written.configmap is True
    assert checkpoint.signature_ok(published, checkpoint.signing_key())


def test_no_checkpoint_yet_is_not_a_failure():
    assert checkpoint.checkpoint_verify().seq is None and problems() == []
    assert Resource.objects.count() == 0
