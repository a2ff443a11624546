"""The hash chain: canonical encoding, hashing, and chain_verify naming the first broken row of each chain
after rows are edited, removed, reordered or forged behind the ORM's back."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db import connection, connections

from reconcilers.engine import audit
from reconcilers.engine.audit import (
    HASHED_FIELDS,
    canonical_encoding,
    chain_verify,
    row_fields,
    transition_hash,
)
from reconcilers.models import Resource, Transition
from tests.reconcilers.audit_support import (
    delete_row,
    edit_row,
    observed,
    record,
    record_phases,
    swap_ids,
    swap_seq,
    tamper,
)

PHASES = ["Pending", "Running", "Degraded", "Running", "Failed"]
FIELDS = {
    "resource_uid": "u",
    "kind": "Memcached",
    "namespace": "default",
    "name": "m",
    "seq": 1,
    "from_phase": "",
    "to_phase": "Pending",
    "reason": "Created",
    "message": "naïve ✓",
    "generation": 1,
    "resource_version": "7",
    "actor": "controller",
    "run_id": 3,
    "trace_id": "",
    "created_at": datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
}


class TestCanonicalEncoding:
    def test_it_is_sorted_compact_utf8_json_with_prev_hash_and_version(self):
        encoded = canonical_encoding(FIELDS, "abc")
        assert encoded.startswith(b'{"actor":"controller","created_at":"2026-01-02T03:04:05.000006+00:00",')
        assert b'"prev_hash":"abc"' in encoded and b'"v":1' in encoded
        assert "naïve ✓".encode() in encoded and b" " not in encoded.replace("naïve ✓".encode(), b"")

    def test_the_same_instant_in_another_timezone_encodes_the_same(self):
        other = dict(FIELDS, created_at=FIELDS["created_at"].astimezone(timezone(timedelta(hours=5))))
        assert canonical_encoding(other, "") == canonical_encoding(FIELDS, "")

    def test_a_naive_time_or_a_missing_field_is_refused(self):
        with pytest.raises(ValueError, match="timezone-aware"):
            canonical_encoding(dict(FIELDS, created_at=datetime(2026, 1, 1)), "")
        with pytest.raises(KeyError, match="trace_id"):
            canonical_encoding({k: v for k, v in FIELDS.items() if k != "trace_id"}, "")

    @pytest.mark.parametrize("name", HASHED_FIELDS)
    def test_changing_any_hashed_field_changes_the_hash(self, name):
        value = FIELDS[name]
        changed = value + timedelta(microseconds=1) if isinstance(value, datetime) else (
            value + 1 if isinstance(value, int) else value + "x"
        )
        assert transition_hash(dict(FIELDS, **{name: changed}), "") != transition_hash(FIELDS, "")

    def test_the_hash_covers_prev_hash_and_is_sha256_hex(self):
        digest = transition_hash(FIELDS, "")
        assert len(digest) == 64 and int(digest, 16) >= 0
        assert transition_hash(FIELDS, "a" * 64) != digest
        assert transition_hash(FIELDS, "") == digest


@pytest.mark.django_db
class TestChainVerify:
    def test_clean_chains_verify_and_are_counted(self):
        record_phases("uid-a", PHASES)
        record_phases("uid-b", PHASES[:2])
        report = chain_verify()
        assert report.ok and report.breaks == []
        assert (report.chains, report.transitions) == (2, 7)
        assert chain_verify("uid-b").transitions == 2

    def test_the_stored_rows_hash_to_what_they_record_after_a_database_round_trip(self):
        rows = record_phases("uid-a", PHASES)
        for row in rows:
            fresh = Transition.objects.get(id=row.id)
            assert transition_hash(row_fields(fresh), fresh.prev_hash) == fresh.hash

    def test_an_edited_field_names_that_row(self):
        rows = record_phases("uid-a", PHASES)
        edit_row(rows[2], "to_phase", "Running")
        (found,) = chain_verify().breaks
        assert (found.resource_uid, found.seq, found.transition_id, found.problem) == ("uid-a", 3, rows[2].id, "edited")
        assert "no longer match its hash" in found.detail

    def test_an_edited_row_whose_hash_was_recomputed_is_named_through_the_next_rows_link(self):
        rows = record_phases("uid-a", PHASES)
        forged = dict(row_fields(rows[1]), reason="Forged")
        tamper([
            (
                "UPDATE reconcilers_transition SET reason = %s, hash = %s WHERE id = %s",
                ("Forged", transition_hash(forged, rows[1].prev_hash), rows[1].id),
            )
        ])
        (found,) = chain_verify().breaks
        assert (found.seq, found.transition_id, found.problem) == (2, rows[1].id, "edited")
        assert "seq 3" in found.detail

    def test_the_newest_row_edited_with_its_hash_recomputed_is_caught_by_the_resource_head(self):
        rows = record_phases("uid-a", PHASES)
        last = rows[-1]
        tamper([
            (
                "UPDATE reconcilers_transition SET message = 'x', hash = %s WHERE id = %s",
                (transition_hash(dict(row_fields(last), message="x"), last.prev_hash), last.id),
            )
        ])
        (found,) = chain_verify().breaks
        assert (found.seq, found.transition_id, found.problem) == (5, last.id, "edited")

    def test_a_removed_row_names_the_row_after_the_gap(self):
        rows = record_phases("uid-a", PHASES)
        delete_row(rows[1])
        (found,) = chain_verify().breaks
        assert (found.seq, found.transition_id, found.problem) == (3, rows[2].id, "removed")
        assert "seq 2 missing" in found.detail

    def test_a_removed_newest_row_is_reported_against_the_resource_head(self):
        rows = record_phases("uid-a", PHASES)
        delete_row(rows[-1])
        (found,) = chain_verify().breaks
        assert (found.seq, found.transition_id, found.problem) == (5, None, "removed")
        assert (found.kind, found.namespace, found.name) == ("Memcached", "default", "m-uid-a")

    def test_removed_rows_renumbered_to_close_the_gap_are_caught(self):
        rows = record_phases("uid-a", PHASES)
        delete_row(rows[1])
        tamper([("UPDATE reconcilers_transition SET seq = seq - 1 WHERE resource_uid = 'uid-a' AND seq > 2", ())])
        (found,) = chain_verify().breaks
        assert (found.seq, found.transition_id, found.problem) == (2, rows[2].id, "edited")

    def test_two_rows_with_swapped_seqs_are_reported_as_reordered(self):
        rows = record_phases("uid-a", PHASES)
        swap_seq(rows[1], rows[2])
        (found,) = chain_verify().breaks
        assert (found.seq, found.transition_id, found.problem) == (2, rows[2].id, "reordered")

    def test_two_rows_with_swapped_ids_are_reported_as_reordered(self):
        rows = record_phases("uid-a", PHASES)
        swap_ids(rows[2], rows[3])
        (found,) = chain_verify().breaks
        assert (found.seq, found.problem) == (4, "reordered")
        assert found.transition_id == rows[2].id  # seq 4 now lives under seq 3's old id

    def test_a_forged_row_appended_with_a_valid_hash_is_reported_as_inserted(self):
        rows = record_phases("uid-a", PHASES[:2])
        last = rows[-1]
        fields = dict(row_fields(last), seq=3, from_phase="Running", to_phase="Failed", run_id=None)
        tamper([
            (
                "INSERT INTO reconcilers_transition (resource_id, resource_uid, cluster, kind, namespace, name, seq,"
                " from_phase, to_phase, reason, message, generation, resource_version, actor, run_id, trace_id,"
                " created_at, prev_hash, hash, hash_version) VALUES (%s, %s, %s, %s, %s, %s, 3, 'Running', 'Failed',"
                " %s, %s, %s, %s, %s, NULL, %s, %s, %s, %s, %s)",
                (
                    last.resource_id, last.resource_uid, last.cluster, last.kind, last.namespace, last.name,
                    last.reason, last.message, last.generation, last.resource_version, last.actor, last.trace_id,
                    last.created_at, last.hash, transition_hash(fields, last.hash), last.hash_version,
                ),
            )
        ])
        (found,) = chain_verify().breaks
        assert (found.seq, found.problem) == (3, "inserted")

    def test_a_chain_removed_entirely_is_reported_from_the_resource_head(self):
        record_phases("uid-a", PHASES[:2])
        tamper(["DELETE FROM reconcilers_transition WHERE resource_uid = 'uid-a'"])
        (found,) = chain_verify().breaks
        assert (found.resource_uid, found.seq, found.transition_id, found.problem) == ("uid-a", 1, None, "removed")

    def test_only_the_first_broken_row_of_each_chain_is_reported_and_intact_chains_pass(self):
        a = record_phases("uid-a", PHASES)
        record_phases("uid-b", PHASES)
        c = record_phases("uid-c", PHASES)
        edit_row(c[3], "reason", "x")
        edit_row(a[1], "reason", "x")
        edit_row(a[3], "reason", "x")
        report = chain_verify()
        assert not report.ok and report.chains == 3
        assert [(b.resource_uid, b.seq) for b in report.breaks] == [("uid-a", 2), ("uid-c", 4)]

    def test_a_resource_without_transitions_is_not_a_chain(self):
        Resource.objects.create(uid="lonely", key="k", version="v1", plural="p", kind="K", name="n")
        report = chain_verify()
        assert report.ok and report.chains == 0


@pytest.mark.django_db(transaction=True)
def test_a_reconcile_committing_during_verification_raises_no_false_alarm(monkeypatch):
    record_phases("uid-a", PHASES)
    read_heads = audit._heads
    writer: list[threading.Thread] = []

    def heads_then_a_concurrent_commit(resource_uid):
        heads = read_heads(resource_uid)

        def append() -> None:
            try:
                record(observed("uid-a"), "Pending")  # Failed -> Pending: seq 6, committed on another connection
            finally:
                connections.close_all()

        writer.append(threading.Thread(target=append))
        writer[0].start()
        if connection.vendor == "postgresql":
            writer[0].join(30)  # committed now, after the heads were read; the snapshot must not see it
        else:
            writer[0].join(0.5)  # SQLite: the verification's transaction lock holds the writer back
            assert writer[0].is_alive(), "the writer committed during the verification"
        return heads

    monkeypatch.setattr(audit, "_heads", heads_then_a_concurrent_commit)
    report = chain_verify()
    writer[0].join(30)
    assert report.ok, [b.describe() for b in report.breaks]
    assert report.transitions == 5
    monkeypatch.undo()
    after = chain_verify()
    assert after.ok and after.transitions == 6
