"""Issue 20: signed checkpoints anchor the record's heads outside the database. Each tampering an owner of the
database can do behind the ORM (triggers disabled) that the chains alone cannot see is named by audit_verify
against the newest checkpoint; a clean record verifies; a forged checkpoint is named."""

from __future__ import annotations

import json
import stat

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from reconcilers.engine import checkpoint
from reconcilers.engine.audit import chain_verify, record_verify, row_fields, transition_hash
from reconcilers.models import ActionRecord, ReconcileRequest, Resource, Transition
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
    assert (doc["seq"], doc["tree_size"], doc["format"]) == (1, 2, 3)
    assert doc["requests"]["size"] == 1 and len(doc["request_leaves"]) == 1 and doc["database"]
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


# -- issue 37: request identities, unreadable files, another database, the old format ----------------------------


def test_a_request_identity_rewritten_with_its_hash_recomputed_is_named(recorded):
    from reconcilers.models.chain import request_identity_hash

    request = ReconcileRequest.objects.get()
    forged = dict(ReconcileRequest.objects.filter(pk=request.pk).values().get(), actor="user:mallory",
                  reason="mallory asked")
    as_owner(("UPDATE reconcilers_reconcilerequest SET actor = %s, reason = %s, identity_hash = %s WHERE id = %s",
              (forged["actor"], forged["reason"], request_identity_hash(forged), request.pk.hex
               if connection.vendor == "sqlite" else request.pk)))
    assert ReconcileRequest.objects.get().actor == "user:mallory"
    assert chain_verify().ok and record_verify() == []  # the unkeyed identity hash matches the rewrite
    assert problems() == [(f"1 request id={request.pk}", "rewritten")]
    audit_verify_fails(f"checkpoint 1 request id={request.pk}: rewritten: k: its identity")


def test_a_request_the_checkpoint_saw_deleted_is_named_by_its_id(recorded):
    request = ReconcileRequest.objects.get()
    as_owner("DELETE FROM reconcilers_reconcilerequest")
    assert (f"1 request id={request.pk}", "removed") in problems()


def test_requests_made_after_the_checkpoint_are_not_a_problem(recorded):
    ReconcileRequest.objects.create(key="k2", token="t2", actor="user:bob", reason="later")
    assert problems() == []


def unchecked(content: bytes, keys) -> str:
    """audit_verify with `content` as the newest checkpoint file: exit 1, a clear message, no traceback."""
    import io

    path = keys / "checkpoints" / "checkpoint-00000002.json"
    path.write_bytes(content)
    err = io.StringIO()
    with pytest.raises(CommandError) as failure:
        call_command("audit_verify", stdout=io.StringIO(), stderr=err)
    assert failure.value.returncode == 1
    message = str(failure.value)
    assert message.startswith("audit record not checked against a signed checkpoint: checkpoint-00000002.json")
    assert "previous checkpoint (the one before it is checkpoint 1)" in message
    assert "NOT CHECKED checkpoint 2: unreadable: checkpoint-00000002.json" in err.getvalue()
    return message


@pytest.mark.parametrize("content, says", [(b"", "is empty"), (b"  \n", "is empty"), (b"[]", "holds JSON []"),
                                           (b"null", "holds JSON null"), (b'{"seq": 2,', "is not JSON"),
                                           (b"\xff\xfe", "is not UTF-8")])
def test_an_unreadable_newest_checkpoint_file_says_what_it_holds(recorded, keys, content, says):
    assert says in unchecked(content, keys)


@pytest.mark.django_db(transaction=True)  # the command's own process reads what the test wrote
def test_an_unreadable_checkpoint_file_fails_the_command_without_a_traceback(recorded, keys):
    import os
    import subprocess
    import sys

    from tests.support import workers

    (keys / "checkpoints" / "checkpoint-00000002.json").write_text("")
    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    env = dict(os.environ, DATABASE_URL=workers.test_database_url(), OPSCONSOLE_AUDIT_CHECKPOINT_DIR=str(
        keys / "checkpoints"), OPSCONSOLE_AUDIT_KEY_FILE=str(keys / "keys" / "audit-signing.key"))
    done = subprocess.run([sys.executable, "manage.py", "audit_verify"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "checkpoint-00000002.json in" in done.stderr and "is empty" in done.stderr


def test_a_writer_killed_mid_write_leaves_no_checkpoint_file(recorded, keys, monkeypatch):
    from pathlib import Path

    from reconcilers.engine import checkpoint_files

    def half_then_killed(doc, out, **kwargs):
        out.write(json.dumps(doc)[:100])
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(checkpoint_files.json, "dump", half_then_killed)
    monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: None)  # a killed process cleans nothing up
    with pytest.raises(KeyboardInterrupt):
        checkpoint.checkpoint_write()
    monkeypatch.undo()
    names = sorted(p.name for p in (keys / "checkpoints").iterdir())
    assert names[0].startswith(".checkpoint-00000002.") and names[1:] == ["checkpoint-00000001.json"]
    assert problems() == []  # the half-written document is not a checkpoint file: checkpoint 1 is the newest
    assert checkpoint.checkpoint_write().path.name == "checkpoint-00000002.json" and problems() == []


def test_a_checkpoint_of_another_database_says_so_instead_of_removed_rows(recorded):
    from datetime import timedelta

    from django.db.migrations.recorder import MigrationRecorder
    from django.db.models import F

    before = checkpoint.database_identity()
    # another database (DATABASE_URL changed, the same data dir): its own rows, migrated at its own time
    as_owner("DELETE FROM reconcilers_reconcilerequest", "DELETE FROM accounts_actionrecord")
    MigrationRecorder.Migration.objects.update(applied=F("applied") + timedelta(days=3))
    assert checkpoint.database_identity() != before
    report = checkpoint.checkpoint_verify()
    assert [(p.ident, p.problem) for p in report.problems] == [("1", "another database")]
    assert not report.checked and f"first migrated at {before}" in report.problems[0].detail
    message = audit_verify_fails("NOT CHECKED checkpoint 1: another database: checkpoint 1 in")
    assert "removed" not in message and "truncated" not in message


def test_an_old_format_checkpoint_still_verifies_and_says_what_it_does_not_cover(recorded, capsys):
    import base64

    doc = json.loads(recorded.path.read_text())
    for key in ("database", "requests", "request_leaves", "signature"):
        doc.pop(key)
    doc["format"] = 1  # as the version before issue 37 wrote it
    signed = checkpoint._canonical(checkpoint._signed_part(doc))
    doc["signature"] = base64.b64encode(checkpoint.signing_key().sign(signed)).decode()
    recorded.path.write_text(json.dumps(doc))
    report = checkpoint.checkpoint_verify()
    assert report.problems == [] and "format 1" in report.notes[0]
    call_command("audit_verify")
    assert "matches signed checkpoint 1" in capsys.readouterr().out
    as_owner("DELETE FROM reconcilers_transition WHERE resource_uid = 'uid-b'",
             "UPDATE reconcilers_resource SET last_transition_seq = 0, last_transition_hash = '' WHERE uid = 'uid-b'")
    assert ("1 resource=uid-b", "removed") in problems()  # what format 1 covers is still checked


def test_a_checkpoint_of_a_newer_format_is_reported_as_such(recorded):
    doc = json.loads(recorded.path.read_text())
    doc["format"] = 9
    recorded.path.write_text(json.dumps(doc))
    assert problems() == [("1", "newer format")]
    audit_verify_fails("its format is 9; this version verifies formats 1, 2")


@pytest.mark.parametrize("data", [{"checkpoint.json": "{not json"}, {"checkpoint.json": ""}, {"checkpoint.json": "[]"},
                                  None])
def test_a_configmap_that_holds_no_checkpoint_is_named_not_a_traceback(recorded, monkeypatch, data):
    monkeypatch.setattr(checkpoint.kube, "request_json", lambda api, method, path: {"data": data})
    found = checkpoint.configmap_check(object())
    assert [(p.ident, p.problem) for p in found] == [("configmap", "unreadable")]
    assert "checkpoint.json" in found[0].detail
