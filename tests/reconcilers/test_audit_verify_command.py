"""`manage.py audit_verify`: exit 0 and a summary on a clean database; exit 1 naming the first broken row
(resource, seq, id) after a row is edited, deleted or reordered by SQL behind the ORM's back."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from tests.reconcilers.audit_support import delete_row, edit_row, record_phases, swap_seq
from tests.support import workers

ROOT = Path(__file__).resolve().parents[2]
PHASES = ["Pending", "Running", "Degraded", "Running"]


def verify(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("audit_verify", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def verify_fails(*args: str) -> tuple[str, str]:
    err = io.StringIO()
    with pytest.raises(CommandError) as failure:
        call_command("audit_verify", *args, stdout=io.StringIO(), stderr=err)
    assert failure.value.returncode == 1
    return str(failure.value), err.getvalue()


@pytest.mark.django_db
class TestAuditVerify:
    def test_an_empty_database_is_intact(self):
        out, err = verify()
        assert "audit trail intact: 0 transitions in 0 chains verified" in out and err == ""

    def test_a_clean_database_passes_with_a_summary(self):
        record_phases("uid-a", PHASES)
        record_phases("uid-b", PHASES[:2])
        out, _ = verify()
        assert "audit trail intact: 6 transitions in 2 chains verified" in out

    def test_an_edited_row_is_named(self):
        rows = record_phases("uid-a", PHASES)
        edit_row(rows[1], "to_phase", "Failed")
        message, err = verify_fails()
        assert f"first broken row: resource=uid-a seq=2 id={rows[1].id} (edited)" in message
        assert f"BROKEN resource=uid-a (Memcached default/m-uid-a) seq=2 id={rows[1].id}: edited" in err

    def test_a_deleted_row_is_named(self):
        rows = record_phases("uid-a", PHASES)
        delete_row(rows[2])
        message, err = verify_fails()
        assert f"resource=uid-a seq=4 id={rows[3].id} (removed)" in message
        assert "seq 3 missing before it" in err

    def test_a_reordered_row_is_named(self):
        rows = record_phases("uid-a", PHASES)
        swap_seq(rows[1], rows[2])
        message, _ = verify_fails()
        assert f"resource=uid-a seq=2 id={rows[2].id} (reordered)" in message

    def test_the_oldest_broken_row_comes_first_and_one_resource_can_be_checked_alone(self):
        a = record_phases("uid-a", PHASES)
        b = record_phases("uid-b", PHASES)
        edit_row(b[0], "reason", "x")
        edit_row(a[3], "reason", "x")
        message, err = verify_fails()
        assert "broken in 2 of 2 chains" in message and f"resource=uid-a seq=4 id={a[3].id}" in message
        assert err.count("BROKEN") == 2
        message, err = verify_fails("--resource", "uid-b")
        assert f"resource=uid-b seq=1 id={b[0].id}" in message and err.count("BROKEN") == 1

    def test_the_trigger_refuses_again_once_the_dba_re_enabled_it(self):
        rows = record_phases("uid-a", PHASES)
        edit_row(rows[0], "reason", "x")
        sql = "UPDATE reconcilers_transition SET reason = 'y' WHERE id = %s"
        if connection.vendor == "postgresql":
            with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(sql, [rows[0].id])
        else:  # SQLite has no trigger: only the chain tells
            with connection.cursor() as cursor:
                cursor.execute(sql, [rows[0].id])
        verify_fails()


@pytest.mark.django_db(transaction=True)
def test_the_command_exits_0_when_intact_and_1_naming_the_row_when_broken():
    rows = record_phases("uid-a", PHASES)
    env = dict(os.environ, DATABASE_URL=workers.test_database_url())

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "audit_verify"], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=120,
        )

    clean = run()
    assert clean.returncode == 0, clean.stderr
    assert "4 transitions in 1 chains verified" in clean.stdout
    delete_row(rows[1])
    broken = run()
    assert broken.returncode == 1
    assert f"resource=uid-a seq=3 id={rows[2].id}" in broken.stderr
