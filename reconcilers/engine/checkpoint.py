"""Signed checkpoints of the audit record: its heads anchored outside the database (issue 20).

The hash chains (`reconcilers.engine.audit`) detect a change behind the ORM's back, but their heads (the
`Resource` rows' `last_transition_seq/_hash`, the newest action record) live in the same database: whoever can
write it can cut a chain's tail, empty a table or rewrite a whole history and its head. A checkpoint is the
record's signed tree head, as in certificate transparency:

- one leaf per resource chain: `[uid, transitions, revisions, head hash]` (from the resource's head; a chain with
  healing records adds their count as a fifth item, so a checkpoint of a chain without any reads as before), leaf hash
  `sha256(0x00 || canonical JSON of the leaf)`; the leaves sorted by uid;
- `root`: the Merkle tree hash over the leaves (RFC 6962: interior `sha256(0x01 || left || right)`, the split
  at the largest power of two below the size; the empty tree `sha256("")`);
- `actions`: the action record's chain head (`seq`, `hash`); `counts`: the rows of every append-only table (and
  of the reconcile requests);
- `requests`: the Merkle root and number of the reconcile requests' identities, one leaf `[id, identity_hash]`
  per request, the leaves in the file as `request_leaves` (`reconcilers.engine.checkpoint_requests`);
- `database`: which database the checkpoint is of (`database_identity()`: when its first migration was applied,
  which a backup restored keeps and another database does not share);
- `clusters` (format 3, issue 41): per cluster its chains' number, counts and Merkle root; a leaf of a chain of
  another cluster than the default names it (`reconcilers.engine.checkpoint_clusters`);
- `seq` (1, 2, 3… per checkpoint directory), `created_at`, `tree_size`, `format` (3; format 1, written before
  the requests and the database were covered, and format 2, before the clusters were, still verify without
  them), `key_id` (sha256 of the public
  key, hex, first 16) — all of these are what is signed: the canonical JSON of the document without
  `signature`, `leaves` and `request_leaves`, signed with Ed25519; `signature` is base64.

The signing key is not in the database: a PEM file (`settings.OPSCONSOLE_AUDIT_KEY_FILE`, default
`<data dir>/audit-signing.key`, created on first use with mode 0600; in Kubernetes a mounted Secret). A
checkpoint is written where a database writer cannot reach: a JSON file (with its leaves) in
`settings.OPSCONSOLE_AUDIT_CHECKPOINT_DIR` (`checkpoint-<seq>.json`, written atomically and exclusively, never
rewritten: `reconcilers.engine.checkpoint_files`) and,
when a Kubernetes client is given, the ConfigMap `opsconsole-audit-checkpoint` in the leader namespace (the
signed document without its leaves, replaced by each checkpoint).

`checkpoint_verify()` checks the newest file: that it is a checkpoint at all (an empty, `null` or non-JSON file
is `unreadable`, of a format this code does not know `newer format`), its signature with the key, its leaves
against its root, that it is of this database (else `another database`: nothing else is compared), then the
database against it — each resource chain it saw still has its links (not fewer: a cut tail or a rewound head)
and the head it saw is still a link of that chain (not a rewritten history), no table has fewer rows (a
truncate or a delete), the action record's head it saw is still there, each reconcile request it saw is there
with the identity it saw, each chain still in the cluster it saw it in. Together with `chain_verify` (every chain
intact up to its head) this says the record up to the checkpoint is the one that was signed. The chains against the
leaves are `checkpoint_chains`'s, the clusters `checkpoint_clusters`'s, the requests `checkpoint_requests`'s.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Min, Q

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube
from reconcilers.engine.audit import REMOVED, RecordProblem, _consistent_read
from reconcilers.engine.checkpoint_chains import CUT, REWRITTEN, ZEROED, chains_against
from reconcilers.engine.checkpoint_clusters import LEAF_COLUMNS, clusters_against, clusters_summary, leaf_of
from reconcilers.engine.checkpoint_files import UnreadableCheckpoint, checkpoint_dir, files, newest, parse, write_new
from reconcilers.engine.checkpoint_requests import LEAVES as REQUEST_LEAVES
from reconcilers.engine.checkpoint_requests import request_leaves, requests_against, signed_summary
from reconcilers.engine.merkle import canonical as _canonical
from reconcilers.engine.merkle import leaf_hash, merkle_root
from reconcilers.models import (
    ActionRecord,
    Anomaly,
    HealingRecord,
    KubeEvent,
    ReconcileRequest,
    ReconcileRun,
    Resource,
    SpecRevision,
    Transition,
)

log = logging.getLogger(__name__)

FORMAT = 3
#: the formats this code verifies (1: before request identities and the database were covered; 2: before the
#: clusters were)
FORMATS = (1, 2, 3)
CONFIGMAP = ResourceKind("", "v1", "configmaps", "ConfigMap")
FIELD_MANAGER = "opsconsole-audit"
#: what a checkpoint's document may not have fewer rows of than the database (runs: retention deletes old ones)
_COUNTED = {"transitions": Transition, "spec_revisions": SpecRevision, "anomalies": Anomaly,
            "reconcile_requests": ReconcileRequest, "runs": ReconcileRun, "healing_records": HealingRecord,
            "kube_events": KubeEvent}
_NEVER_FEWER = ("transitions", "spec_revisions", "anomalies", "reconcile_requests", "actions", "healing_records")
TRUNCATED, FORGED = "truncated", "forged"
#: problems that mean the database was not compared with a checkpoint at all (the newest one cannot be used)
UNREADABLE, NEWER_FORMAT, OTHER_DATABASE = "unreadable", "newer format", "another database"
NOT_CHECKED = (UNREADABLE, NEWER_FORMAT, OTHER_DATABASE)
__all__ = ["CUT", "REWRITTEN", "ZEROED", "UnreadableCheckpoint", "checkpoint_dir", "leaf_hash", "merkle_root",
           "newest", "parse"]


# -- keys -------------------------------------------------------------------------------------------------


def key_path() -> Path:
    """The signing key's file (settings.OPSCONSOLE_AUDIT_KEY_FILE)."""
    return Path(settings.OPSCONSOLE_AUDIT_KEY_FILE)


def signing_key(*, create: bool = True) -> Any:
    """The Ed25519 private key from its file; generated (mode 0600) when missing and `create`; None when
    missing and not `create`."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = key_path()
    if not path.exists():
        if not create:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process made it first
        else:
            with os.fdopen(fd, "wb") as out:
                out.write(pem)
            log.info("audit checkpoints: a new signing key in %s", path)
    return serialization.load_pem_private_key(path.read_bytes(), password=None)


def _public_raw(private: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(private: Any) -> str:
    """The key's id: sha256 of its raw public key, hex, first 16."""
    return hashlib.sha256(_public_raw(private)).hexdigest()[:16]


# -- the tree ---------------------------------------------------------------------------------------------


def _leaves() -> list[list[Any]]:
    rows = (Resource.objects.filter(Q(last_transition_seq__gt=0) | Q(last_revision_seq__gt=0)
                                    | Q(last_healing_seq__gt=0)).order_by("uid")
            .values_list(*LEAF_COLUMNS))
    return [leaf_of(*row) for row in rows]


def database_identity() -> str:
    """Which database this is: when its first migration was applied (UTC, ISO-8601 with microseconds), from
    Django's `django_migrations`. A copy or a restored backup keeps it whatever its host, port or name; another
    database (a new `DATABASE_URL`) has its own. '' when the database was never migrated."""
    from django.db.migrations.recorder import MigrationRecorder

    first = MigrationRecorder(connection).migration_qs.aggregate(first=Min("applied"))["first"]
    return first.astimezone(UTC).isoformat(timespec="microseconds") if first is not None else ""


def _state() -> dict[str, Any]:
    """The record's heads and counts, read in one snapshot."""
    with _consistent_read():
        leaves = _leaves()
        counts = {name: model.objects.count() for name, model in _COUNTED.items()}
        counts["actions"] = ActionRecord.objects.count()
        head = ActionRecord.objects.order_by("-seq").values("seq", "hash").first() or {"seq": 0, "hash": ""}
        requests = request_leaves()
    return {"leaves": leaves, "counts": counts, "actions": head, "requests": requests,
            "database": database_identity()}


def _signed_part(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("signature", "leaves", REQUEST_LEAVES)}


# -- writing ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Written:
    """A checkpoint written: its document (leaves included), its file, and whether the ConfigMap took it."""

    doc: dict[str, Any]
    path: Path
    configmap: bool | None  # None: no client given


def checkpoint_write(api: Any = None) -> Written:
    """Take, sign and write a checkpoint: a new file, and the ConfigMap when `api` is given (a failure to write
    it is logged, the file stays)."""
    state = _state()
    private = signing_key()
    root = merkle_root([leaf_hash(leaf) for leaf in state["leaves"]])
    directory = checkpoint_dir()
    directory.mkdir(parents=True, exist_ok=True)
    while True:
        found = files()
        seq = (found[-1][0] if found else 0) + 1
        doc: dict[str, Any] = {
            "format": FORMAT, "seq": seq, "created_at": datetime.now(UTC).isoformat(timespec="microseconds"),
            "tree_size": len(state["leaves"]), "root": root.hex(), "actions": state["actions"],
            "counts": state["counts"], "key_id": key_id(private), "database": state["database"],
            "requests": signed_summary(state["requests"]), "clusters": clusters_summary(state["leaves"]),
        }
        doc["signature"] = base64.b64encode(private.sign(_canonical(_signed_part(doc)))).decode()
        doc["leaves"] = state["leaves"]
        doc[REQUEST_LEAVES] = state["requests"]
        path = directory / f"checkpoint-{seq:08d}.json"
        if write_new(path, doc):
            break
        # another writer took this seq: the next one
    published = None
    if api is not None:
        published = _configmap_write(api, _signed_part(doc) | {"signature": doc["signature"]})
    log.info("audit checkpoint %d: %d chains, root %s", seq, len(state["leaves"]), doc["root"][:16])
    return Written(doc, path, published)


def _configmap_write(api: Any, signed: dict[str, Any]) -> bool:
    namespace = settings.OPSCONSOLE_LEADER_NAMESPACE
    manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": settings.OPSCONSOLE_AUDIT_CHECKPOINT_CONFIGMAP, "namespace": namespace},
                "data": {"checkpoint.json": json.dumps(signed, sort_keys=True)}}
    try:
        kube.apply_object(api, CONFIGMAP, namespace, manifest["metadata"]["name"], manifest,
                          field_manager=FIELD_MANAGER)
    except Exception:
        log.warning("audit checkpoint %s: could not write the ConfigMap %s/%s", signed.get("seq"), namespace,
                    manifest["metadata"]["name"], exc_info=True)
        return False
    return True


def configmap_read(api: Any) -> dict[str, Any] | None:
    """The signed document in the cluster's ConfigMap (None when there is none); UnreadableCheckpoint when its
    `checkpoint.json` is not a checkpoint document (empty, not JSON, not an object)."""
    namespace, name = settings.OPSCONSOLE_LEADER_NAMESPACE, settings.OPSCONSOLE_AUDIT_CHECKPOINT_CONFIGMAP
    try:
        obj = kube.request_json(api, "GET", kube.object_path(CONFIGMAP, namespace, name))
    except Exception as exc:
        if getattr(exc, "status", None) == 404:
            return None
        raise
    data = obj.get("data") if isinstance(obj, dict) else None
    text = data.get("checkpoint.json") if isinstance(data, dict) else None
    return parse(text if isinstance(text, str) else "", f"the ConfigMap {namespace}/{name}'s checkpoint.json")


# -- verifying --------------------------------------------------------------------------------------------


def signature_ok(doc: dict[str, Any], private: Any) -> bool:
    """Whether `doc`'s signature is the key's over its signed part."""
    from cryptography.exceptions import InvalidSignature

    try:
        private.public_key().verify(base64.b64decode(doc.get("signature") or ""), _canonical(_signed_part(doc)))
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


@dataclass
class CheckpointReport:
    """What `checkpoint_verify` checked (`seq` None: no checkpoint yet), what it found, and what the checkpoint
    did not cover (`notes`: a format 1 checkpoint has no request identities and no database identity)."""

    seq: int | None = None
    created_at: str = ""
    problems: list[RecordProblem] | None = None
    notes: list[str] | None = None
    clusters: dict[str, Any] | None = None  # format 3: the chains it saw per cluster (`checkpoint_clusters`)

    def __post_init__(self) -> None:
        if self.problems is None:
            self.problems = []
        if self.notes is None:
            self.notes = []

    @property
    def checked(self) -> bool:
        """Whether the database was compared with the checkpoint at all (False: the newest one is unreadable, of a
        newer format or of another database)."""
        return not any(problem.problem in NOT_CHECKED for problem in self.problems or [])


def _problem(seq: Any, ident: str, problem: str, detail: str) -> RecordProblem:
    return RecordProblem("checkpoint", f"{seq} {ident}".strip(), problem, detail)


def checkpoint_verify(doc: dict[str, Any] | None = None) -> CheckpointReport:
    """Check the newest checkpoint (or `doc`): signature, leaves, then the database against it."""
    if doc is None:
        try:
            found = newest()
        except UnreadableCheckpoint as exc:
            return _unreadable(exc)
        if found is None:
            return CheckpointReport()
        doc = found[1]
    seq = doc.get("seq")
    report = CheckpointReport(seq=seq, created_at=str(doc.get("created_at", "")),
                              clusters=doc.get("clusters") if isinstance(doc.get("clusters"), dict) else None)
    problems = report.problems
    assert problems is not None and report.notes is not None
    if doc.get("format") not in FORMATS:
        problems.append(_problem(seq, "", NEWER_FORMAT, f"its format is {doc.get('format')!r}; this version "
                                 f"verifies formats {', '.join(map(str, FORMATS))}: verify with the version that "
                                 "wrote it, or a newer one"))
        return report
    private = signing_key(create=False)
    if private is None:
        problems.append(_problem(seq, "", FORGED, f"no signing key at {key_path()}: the checkpoint cannot be checked"))
        return report
    if doc.get("key_id") != key_id(private) or not signature_ok(doc, private):
        problems.append(_problem(seq, "", FORGED, "its signature is not the audit key's (a forged or altered "
                                 "checkpoint)"))
        return report
    leaves = doc.get("leaves") or []
    if merkle_root([leaf_hash(leaf) for leaf in leaves]).hex() != doc.get("root") or len(leaves) != doc.get(
            "tree_size"):
        problems.append(_problem(seq, "", FORGED, "its leaves do not make its signed root"))
        return report
    if doc.get("format") == 1:
        report.notes.append(f"checkpoint {seq} is of format 1: it does not cover the reconcile requests' identities "
                            "nor say which database it is of (the next checkpoint does)")
    elif doc.get("database") != (here := database_identity()):
        problems.append(_problem(seq, "", OTHER_DATABASE, f"checkpoint {seq} in {checkpoint_dir()} was written for "
                                 f"another database (first migrated at {doc.get('database') or '?'}; this one was "
                                 f"first migrated at {here or '?'}): nothing of this database was checked against "
                                 "it. Point OPSCONSOLE_AUDIT_CHECKPOINT_DIR at this database's checkpoints, or "
                                 "write this database's first with manage.py audit_checkpoint"))
        return report
    elif doc.get("format") == 2:
        report.notes.append(f"checkpoint {seq} is of format 2: it does not name the cluster of each chain (the next "
                            "checkpoint does)")

    with _consistent_read():
        counts = {name: model.objects.count() for name, model in _COUNTED.items()}
        counts["actions"] = ActionRecord.objects.count()
        for name in _NEVER_FEWER:
            then, now = (doc.get("counts") or {}).get(name, 0), counts[name]
            if now < then:
                problem = TRUNCATED if now == 0 else REMOVED
                problems.append(_problem(seq, f"table={name}", problem,
                                         f"{now} rows now, the checkpoint counted {then}"))
        actions = doc.get("actions") or {}
        if actions.get("seq"):
            row = ActionRecord.objects.filter(seq=actions["seq"]).values("hash").first()
            top = ActionRecord.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
            if row is None:
                problems.append(_problem(seq, f"action seq={actions['seq']}", CUT,
                                         f"the action record ends at seq {top}, the checkpoint saw "
                                         f"{actions['seq']}"))
            elif row["hash"] != actions["hash"]:
                problems.append(_problem(seq, f"action seq={actions['seq']}", REWRITTEN,
                                         "its hash is not the one the checkpoint saw"))
        problems.extend(chains_against(seq, leaves))
        problems.extend(clusters_against(seq, doc, leaves))
        problems.extend(requests_against(seq, doc))
    return report


def _unreadable(exc: UnreadableCheckpoint) -> CheckpointReport:
    found = files()
    seq = found[-1][0]
    before = f"the one before it is checkpoint {found[-2][0]}" if len(found) > 1 else "there is no other"
    detail = (f"{exc.where} in {checkpoint_dir()} {exc.reason}: the database was not checked against it. Move it "
              f"aside to verify against the previous checkpoint ({before})")
    return CheckpointReport(seq=seq, problems=[_problem(seq, "", UNREADABLE, detail)])


def configmap_check(api: Any) -> list[RecordProblem]:
    """The cluster's copy against the newest file: its signature, and that the files are not behind it (a
    deleted newest file would let an attacker fall back to an older checkpoint) nor differ from it."""
    try:
        published = configmap_read(api)
    except UnreadableCheckpoint as exc:
        return [_problem("", "configmap", UNREADABLE, f"{exc.where} {exc.reason}: the cluster's copy is not a "
                         "checkpoint")]
    if published is None:
        return []
    seq = published.get("seq")
    private = signing_key(create=False)
    if private is None or published.get("key_id") != key_id(private) or not signature_ok(published, private):
        return [_problem(seq, "configmap", FORGED, "the cluster's copy is not signed with the audit key")]
    found = files()
    top = found[-1][0] if found else 0
    if top < seq:
        return [_problem(seq, "configmap", REMOVED, f"the cluster holds checkpoint {seq}, the newest file is "
                         f"{top or 'none'}: checkpoint files were removed")]
    if top == seq:
        try:
            newest_doc = newest()
        except UnreadableCheckpoint:
            return []  # checkpoint_verify names the unreadable file
        if newest_doc and newest_doc[1].get("root") != published.get("root"):
            return [_problem(seq, "configmap", FORGED, "the cluster's copy and the file differ")]
    return []
