"""Issue 41: a signed checkpoint covers every cluster's chains and says which (format 3: `clusters`, the cluster in
the leaf of a chain outside the default cluster); a chain moved to another cluster is named; format 2 checkpoints
keep verifying."""

from __future__ import annotations

import base64
import io
import json

import pytest
from django.core.management import CommandError, call_command

from reconcilers.engine import checkpoint
from reconcilers.engine.checkpoint_clusters import clusters_summary, leaf_cluster
from reconcilers.models import Resource
from tests.reconcilers.engine.test_audit_clusters import UIDS, two_chains  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def keys(settings, tmp_path):
    settings.OPSCONSOLE_AUDIT_KEY_FILE = str(tmp_path / "keys" / "audit-signing.key")
    settings.OPSCONSOLE_AUDIT_CHECKPOINT_DIR = str(tmp_path / "checkpoints")
    return tmp_path


def resign(path, doc) -> None:
    """Write `doc` signed with the audit key, as the version that wrote such a document would have."""
    doc.pop("signature", None)
    doc["signature"] = base64.b64encode(
        checkpoint.signing_key().sign(checkpoint._canonical(checkpoint._signed_part(doc)))).decode()
    path.write_text(json.dumps(doc))


def test_a_checkpoint_lists_each_clusters_chains_and_verifies(two_chains, capsys):  # noqa: F811
    out = io.StringIO()
    call_command("audit_checkpoint", "--no-configmap", stdout=out)
    assert "clusters: b 1 chain, default 1 chain" in out.getvalue()
    doc = json.loads(sorted((checkpoint.checkpoint_dir()).glob("checkpoint-*.json"))[-1].read_text())
    assert doc["format"] == 3 and doc["tree_size"] == 2
    assert {leaf[0]: leaf_cluster(leaf) for leaf in doc["leaves"]} == {UIDS["default"]: "default", UIDS["b"]: "b"}
    b_leaf = next(leaf for leaf in doc["leaves"] if leaf[0] == UIDS["b"])
    assert b_leaf == [UIDS["b"], 2, 1, two_chains["b"].last_transition_hash, 1, "b"]
    clusters = doc["clusters"]
    assert sorted(clusters) == ["b", "default"]
    for name in ("b", "default"):
        assert {k: clusters[name][k] for k in ("chains", "transitions", "revisions", "healing")} == {
            "chains": 1, "transitions": 2, "revisions": 1, "healing": 1}
    assert clusters["b"]["root"] != clusters["default"]["root"]
    assert clusters == clusters_summary(doc["leaves"])
    report = checkpoint.checkpoint_verify()
    assert report.problems == [] and report.notes == [] and report.clusters == clusters
    call_command("audit_verify")
    assert "matches signed checkpoint 1" in (text := capsys.readouterr().out)
    assert "(clusters: b 1 chain, default 1 chain)" in text


def test_a_chain_moved_to_another_cluster_after_the_checkpoint_is_named(two_chains):  # noqa: F811
    checkpoint.checkpoint_write()
    Resource.objects.filter(uid=UIDS["b"]).update(cluster="default", key=two_chains["default"].key + "-b")
    found = [(p.ident, p.problem) for p in checkpoint.checkpoint_verify().problems]
    assert found == [(f"1 resource={UIDS['b']}", "moved")]
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("audit_verify", stdout=io.StringIO(), stderr=err)
    assert "checkpoint 1 saw it in cluster b" in err.getvalue()


def test_signed_clusters_its_leaves_do_not_make_are_named_forged(two_chains):  # noqa: F811
    written = checkpoint.checkpoint_write()
    doc = json.loads(written.path.read_text())
    doc["clusters"]["b"]["chains"] = 2
    resign(written.path, doc)
    assert [(p.ident, p.problem) for p in checkpoint.checkpoint_verify().problems] == [("1 clusters", "forged")]


def test_a_format_2_checkpoint_still_verifies_and_says_it_names_no_cluster(two_chains, capsys):  # noqa: F811
    written = checkpoint.checkpoint_write()
    doc = json.loads(written.path.read_text())
    doc.pop("clusters")
    doc["format"] = 2  # as the version before issue 41 wrote it: no cluster in any leaf
    doc["leaves"] = [leaf[:5] for leaf in doc["leaves"]]
    doc["root"] = checkpoint.merkle_root([checkpoint.leaf_hash(leaf) for leaf in doc["leaves"]]).hex()
    resign(written.path, doc)
    report = checkpoint.checkpoint_verify()
    assert report.problems == [] and "format 2" in report.notes[0] and report.clusters is None
    call_command("audit_verify")
    assert "matches signed checkpoint 1" in capsys.readouterr().out
    Resource.objects.filter(uid=UIDS["b"]).update(last_transition_seq=1)  # what format 2 covers is still checked
    assert (f"1 resource={UIDS['b']}", "cut") in [(p.ident, p.problem) for p in checkpoint.checkpoint_verify().problems]
