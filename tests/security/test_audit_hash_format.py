"""Issue 20: hash format 2 covers who and what, `resource_id` included (format 3, issue 41, the cluster too:
tests/reconcilers/engine/test_audit_clusters.py); format 1 rows keep verifying; a row moved into another
resource's history is named by audit_verify."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from reconcilers.engine.audit import HASH_VERSION, chain_verify, row_fields, transition_hash
from reconcilers.models import Resource, Transition
from tests.reconcilers.audit_support import edit_row, record_phases, tamper

pytestmark = pytest.mark.django_db


def test_new_rows_are_format_3_and_their_hash_covers_the_resource_row():
    (row,) = record_phases("uid-a", ["Pending"])
    assert row.hash_version == HASH_VERSION == 3
    fields = row_fields(row)
    assert fields["resource_id"] == row.resource_id and transition_hash(fields, "") == row.hash
    assert transition_hash(dict(fields, resource_id=row.resource_id + 1), "") != row.hash
    assert transition_hash(dict(fields, hash_version=1), "") != row.hash  # the format is hashed too
    assert chain_verify().ok


def test_a_format_1_row_keeps_verifying_with_format_1():
    (row,) = record_phases("uid-a", ["Pending"])
    v1 = transition_hash({k: v for k, v in row_fields(row).items()
                          if k not in ("hash_version", "resource_id", "cluster")}, "")
    tamper([("UPDATE reconcilers_transition SET hash_version = 1, hash = %s WHERE id = %s", (v1, row.id))])
    Resource.objects.filter(uid="uid-a").update(last_transition_hash=v1)
    assert chain_verify().ok
    edit_row(Transition.objects.get(id=row.id), "reason", "Forged")
    assert [b.problem for b in chain_verify().breaks] == ["edited"]


@pytest.mark.parametrize("version", [1, 2])
def test_a_transition_moved_into_another_resources_history_is_named(version, capsys):
    rows = record_phases("uid-a", ["Pending", "Running"])
    record_phases("uid-b", ["Pending"])
    if version == 1:  # rehash uid-a's chain in format 1, as rows written before migration 0007 are
        prev = ""
        for row in rows:
            fields = {k: v for k, v in row_fields(row).items() if k not in ("hash_version", "resource_id", "cluster")}
            digest = transition_hash(fields, prev)
            tamper([("UPDATE reconcilers_transition SET hash_version = 1, prev_hash = %s, hash = %s WHERE id = %s",
                     (prev, digest, row.id))])
            prev = digest
        Resource.objects.filter(uid="uid-a").update(last_transition_hash=prev)
        assert chain_verify().ok
    other = Resource.objects.get(uid="uid-b")
    edit_row(rows[1], "resource_id", other.id)
    (found,) = chain_verify().breaks
    assert (found.resource_uid, found.seq, found.transition_id, found.problem) == ("uid-a", 2, rows[1].id, "moved")
    assert "uid-b" in found.detail
    (one,) = chain_verify("uid-a").breaks  # one chain (the detail page): the same finding, the other row named
    assert (one.resource_uid, one.seq, one.problem) == ("uid-a", 2, "moved") and "resource uid-b" in one.detail
    with pytest.raises(CommandError, match="moved"):
        call_command("audit_verify")
    assert "moved: it is filed under resource uid-b" in capsys.readouterr().err
