"""Known hashes pinned: the canonical encoding of every link (transition in hash formats 1, 2 and 3, spec revision
in the three formats, healing record in formats 2 and 3) gives byte-for-byte the digests chains on record were
written with, so a change to the encoder that would break existing chains fails here before `audit_verify` meets it
in a database."""

from __future__ import annotations

from datetime import UTC, datetime

from reconcilers.engine import audit
from reconcilers.engine.recording import transition_row
from reconcilers.models import Resource

AT = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
TRANSITION = {
    "resource_uid": "u", "kind": "Memcached", "namespace": "default", "name": "m", "seq": 1, "from_phase": "",
    "to_phase": "Pending", "reason": "Created", "message": "naïve ✓", "generation": 1, "resource_version": "7",
    "actor": "controller", "run_id": 3, "trace_id": "", "created_at": AT,
}
REVISION = {
    "resource_uid": "u", "kind": "Memcached", "namespace": "default", "name": "m", "seq": 2, "chain_after": 1,
    "generation": 2, "resource_version": "8", "spec": {"size": 3, "b": {"z": 1, "a": [1, "é"]}},
    "diff": [{"path": "size", "from": 1, "to": 3}], "actor": "kube:alice", "operation": "Update",
    "managers": [{"manager": "kubectl", "operation": "Update"}], "changed_at": AT, "created_at": AT,
}
HEALING = {
    "resource_uid": "u", "resource_id": 7, "kind": "Memcached", "namespace": "default", "name": "m", "seq": 1,
    "chain_after": 2, "revision_after": 1, "action": "anomaly.detected", "rule": "crashloop", "actor": "controller",
    "reason": "r", "message": "m ✓", "generation": 2, "target_generation": None, "detail": {"b": 1, "a": ["x"]},
    "expires_at": None, "created_at": AT,
}


def test_transition_hashes_are_pinned_in_both_formats():
    assert audit.transition_hash(TRANSITION, "") == "49ebdc6dc17f70cbaf18625b98532e7bdc51810dd6401f3141010e2877688213"
    assert audit.transition_hash(dict(TRANSITION, hash_version=2, resource_id=7), "ab" * 32) == (
        "efefc7ec02a19178208ca64bc95d3376e33e6f2cd8561c6cdc9aa382069d14d7")


def test_revision_hashes_are_pinned_in_both_formats():
    assert audit.revision_hash(REVISION, "cd" * 32) == (
        "82cdab6be8d3c1a4380234ca66da010b634fb65a5e114c8934a66848d918d144")
    assert audit.revision_hash(dict(REVISION, hash_version=2, resource_id=7), "cd" * 32) == (
        "14ce2f92a5f59051a54545e6eae62bb2a1fac305059497a2d112d45d296bfdf5")


def test_format_3_hashes_cover_the_cluster_and_are_pinned():
    assert audit.transition_hash(dict(TRANSITION, hash_version=3, resource_id=7, cluster="b"), "ab" * 32) == (
        "485e95e9bb091b165882477d3f0c95766d7896868116c760c34232c82a36f0de")
    assert audit.revision_hash(dict(REVISION, hash_version=3, resource_id=7, cluster="b"), "cd" * 32) == (
        "f30120c747192b60a18bbd4217f61ab28524e336819d7cf85f3b2babc6b15b91")
    assert audit.healing_hash(dict(HEALING, hash_version=3, cluster="b"), "ef" * 32) == (
        "d124f78c76562760661fcb20b00ae125e11ba7f54b7402e23253281ee3f46e90")
    encoded = audit.canonical_encoding(dict(TRANSITION, hash_version=3, resource_id=7, cluster="b"), "")
    assert b'"cluster":"b"' in encoded and encoded.endswith(b'"v":3}')
    # format 2 does not read the cluster: a row written before migration 0021 hashes as it did
    assert audit.transition_hash(dict(TRANSITION, hash_version=2, resource_id=7, cluster="b"), "ab" * 32) == (
        "efefc7ec02a19178208ca64bc95d3376e33e6f2cd8561c6cdc9aa382069d14d7")
    assert audit.healing_hash(dict(HEALING, hash_version=2, cluster="b"), "ef" * 32) == audit.healing_hash(
        HEALING, "ef" * 32)


def test_the_healing_encoding_and_hash_are_pinned():
    assert audit.healing_encoding(HEALING, "ef" * 32) == (
        b'{"action":"anomaly.detected","actor":"controller","chain_after":2,'
        b'"created_at":"2026-01-02T03:04:05.000006+00:00","detail":{"a":["x"],"b":1},"expires_at":null,'
        b'"generation":2,"kind":"Memcached","link":"healing","message":"m \xe2\x9c\x93","name":"m",'
        b'"namespace":"default","prev_hash":"' + b"ef" * 32 + b'","reason":"r","resource_id":7,"resource_uid":"u",'
        b'"revision_after":1,"rule":"crashloop","seq":1,"target_generation":null,"v":2}')
    assert audit.healing_hash(HEALING, "ef" * 32) == "9170d54e49bc93bb21bf1d857779abbede70395e77e756a24dca89b49cf9dfc8"


def test_a_built_transition_link_is_pinned():
    resource = Resource(id=7, uid="u", kind="Memcached", namespace="default", name="m", phase="Running",
                        phase_since=AT, last_transition_seq=2, last_transition_hash="ab" * 32, generation=4,
                        resource_version="9")
    row = transition_row(resource, to_phase="Degraded", reason="Probe", message="down", at=AT)
    assert (row.seq, row.prev_hash, row.from_phase, row.hash_version, row.cluster) == (
        3, "ab" * 32, "Running", 3, "default")
    assert row.hash == "1a41b1af34ca849578a14209619d0ad7ba7044951f4d1d3253eaab3596bc5b4b"
    # the same link in format 2 (as it was built before migration 0021)
    assert audit.transition_hash(dict(audit.row_fields(row), hash_version=2), row.prev_hash) == (
        "3e2f86904c73d0bcf59d9120d16d0bb4fc3ab77d874f9d8d9372344f62cbf925")
