"""The hash format of the per-resource chains: each link kind's hashed fields, the one canonical encoder
(`link_encoding`, parameterised by the field list) and the hashes of transitions, spec revisions and healing
records (see `reconcilers.engine.audit` for the chain they make).

Formats: 1 (before migration 0007), 2 (+ `resource_id`, the Resource row the link is filed under), 3 (+ `cluster`,
the cluster the object lives in, issue 41: a link cannot be moved to another cluster's copy of the same
namespace/name). A row keeps the format it was written with (`hash_version`) and verifies with it; new rows are
written in HASH_VERSION. A healing record has formats 2 and 3 only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from reconcilers.models import HealingRecord, SpecRevision, Transition

#: the fields covered by a transition's hash, in the canonical encoding (prev_hash is added to them)
HASHED_FIELDS: tuple[str, ...] = (
    "resource_uid",
    "kind",
    "namespace",
    "name",
    "seq",
    "from_phase",
    "to_phase",
    "reason",
    "message",
    "generation",
    "resource_version",
    "actor",
    "run_id",
    "trace_id",
    "created_at",
)
ENCODING_VERSION = 1
#: hash format 2 (rows written since migration 0007, `hash_version` 2) also covers the row's `resource_id`, the
#: Resource it is filed under, so a row cannot be moved into another resource's history; format 1 rows keep
#: verifying with format 1 (their `resource_id` is checked against their `resource_uid` instead)
HASHED_FIELDS_V2: tuple[str, ...] = (*HASHED_FIELDS, "resource_id")
#: hash format 3 (rows written since migration 0021, `hash_version` 3) also covers the row's `cluster`
HASHED_FIELDS_V3: tuple[str, ...] = (*HASHED_FIELDS_V2, "cluster")
#: the format new links are written in
HASH_VERSION = 3
HASH_VERSIONS = (1, 2, 3)

#: the fields covered by a spec revision's hash (prev_hash and `"link": "revision"` are added to them)
REVISION_HASHED_FIELDS: tuple[str, ...] = (
    "resource_uid",
    "kind",
    "namespace",
    "name",
    "seq",
    "chain_after",
    "generation",
    "resource_version",
    "spec",
    "diff",
    "actor",
    "operation",
    "managers",
    "changed_at",
    "created_at",
)
REVISION_HASHED_FIELDS_V2: tuple[str, ...] = (*REVISION_HASHED_FIELDS, "resource_id")
REVISION_HASHED_FIELDS_V3: tuple[str, ...] = (*REVISION_HASHED_FIELDS_V2, "cluster")
#: the fields covered by a healing record's hash (prev_hash and `"link": "healing"` are added) in format 2 (its
#: first); format 3 adds `cluster`
HEALING_HASHED_FIELDS: tuple[str, ...] = (
    "resource_uid",
    "resource_id",
    "kind",
    "namespace",
    "name",
    "seq",
    "chain_after",
    "revision_after",
    "action",
    "rule",
    "actor",
    "reason",
    "message",
    "generation",
    "target_generation",
    "detail",
    "expires_at",
    "created_at",
)
HEALING_HASHED_FIELDS_V3: tuple[str, ...] = (*HEALING_HASHED_FIELDS, "cluster")
#: a healing record's first format (there is no healing format 1)
HEALING_FIRST_VERSION = 2
TRANSITION, REVISION, HEALING = "transition", "revision", "healing"

_TRANSITION_FIELDS = {1: HASHED_FIELDS, 2: HASHED_FIELDS_V2, 3: HASHED_FIELDS_V3}
_REVISION_FIELDS = {1: REVISION_HASHED_FIELDS, 2: REVISION_HASHED_FIELDS_V2, 3: REVISION_HASHED_FIELDS_V3}
_HEALING_FIELDS = {2: HEALING_HASHED_FIELDS, 3: HEALING_HASHED_FIELDS_V3}


def _version(fields: Mapping[str, Any], default: int = ENCODING_VERSION) -> int:
    version = fields.get("hash_version", default)
    if version not in HASH_VERSIONS:
        raise ValueError(f"unknown hash format {version!r}")
    return int(version)


def hashed_fields(version: int = ENCODING_VERSION, *, revision: bool = False) -> tuple[str, ...]:
    """The fields a transition's (or a revision's) hash covers in hash format `version`."""
    return (_REVISION_FIELDS if revision else _TRANSITION_FIELDS)[version]


def healing_hashed_fields(version: int = HEALING_FIRST_VERSION) -> tuple[str, ...]:
    """The fields a healing record's hash covers in hash format `version` (2 or 3)."""
    if version not in _HEALING_FIELDS:
        raise ValueError(f"unknown healing hash format {version!r}")
    return _HEALING_FIELDS[version]


def _canonical_value(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("transition times must be timezone-aware")
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    return value


def link_encoding(fields: Mapping[str, Any], prev_hash: str, names: tuple[str, ...], *, version: int,
                  link: str | None = None, noun: str = TRANSITION, lenient: bool = False) -> bytes:
    """The canonical encoding of one link of a chain, the one encoder of every link kind: a JSON object of the
    `names` of `fields` + prev_hash + the hash format as `v` (+ the link kind as `link`, when given: a transition
    has none), keys sorted (JSON values such as a spec too), no whitespace, UTF-8, times as UTC ISO-8601 with
    microseconds. A field missing from `fields` is a KeyError naming the `noun`; `lenient` encodes a value JSON
    does not know as its str() (a healing record's evidence) instead of refusing it."""
    missing = [name for name in names if name not in fields]
    if missing:
        raise KeyError(f"missing {noun} fields: {missing}")
    doc = {name: _canonical_value(fields[name]) for name in names}
    doc["prev_hash"] = prev_hash
    if link is not None:
        doc["link"] = link
    doc["v"] = version
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str if lenient else None).encode("utf-8")


def _sha256(encoded: bytes) -> str:
    return hashlib.sha256(encoded).hexdigest()


def canonical_encoding(fields: Mapping[str, Any], prev_hash: str) -> bytes:
    """The bytes a transition's hash covers: `link_encoding` of the hashed fields of its format
    (`fields["hash_version"]`, 1 when absent: HASHED_FIELDS; 2: HASHED_FIELDS_V2; 3: HASHED_FIELDS_V3), no
    `link`."""
    version = _version(fields)
    return link_encoding(fields, prev_hash, hashed_fields(version), version=version)


def transition_hash(fields: Mapping[str, Any], prev_hash: str) -> str:
    """sha256 (hex) of `canonical_encoding(fields, prev_hash)`."""
    return _sha256(canonical_encoding(fields, prev_hash))


def revision_encoding(fields: Mapping[str, Any], prev_hash: str) -> bytes:
    """The bytes a spec revision's hash covers: `link_encoding` of REVISION_HASHED_FIELDS (_V2 in format 2, _V3
    in format 3), with `"link": "revision"`."""
    version = _version(fields)
    return link_encoding(fields, prev_hash, hashed_fields(version, revision=True), version=version, link=REVISION,
                         noun=REVISION)


def revision_hash(fields: Mapping[str, Any], prev_hash: str) -> str:
    """sha256 (hex) of `revision_encoding(fields, prev_hash)`."""
    return _sha256(revision_encoding(fields, prev_hash))


def healing_encoding(fields: Mapping[str, Any], prev_hash: str) -> bytes:
    """The bytes a healing record's hash covers: `link_encoding` of HEALING_HASHED_FIELDS in its format
    (`fields["hash_version"]`, 2 when absent; 3: HEALING_HASHED_FIELDS_V3), `"link": "healing"`, lenient (the
    evidence may hold values JSON does not know)."""
    version = _version(fields, HEALING_FIRST_VERSION)
    return link_encoding(fields, prev_hash, healing_hashed_fields(version), version=version, link=HEALING,
                         noun="healing record", lenient=True)


def healing_hash(fields: Mapping[str, Any], prev_hash: str) -> str:
    """sha256 (hex) of `healing_encoding(fields, prev_hash)`."""
    return _sha256(healing_encoding(fields, prev_hash))


def _get(row: Any, name: str, default: Any = None) -> Any:
    return row.get(name, default) if isinstance(row, Mapping) else getattr(row, name, default)


def link_fields(row: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The `names` of a link: a model instance's attributes or a `.values()` dict's items (a name it lacks
    raises)."""
    if isinstance(row, Mapping):
        return {name: row[name] for name in names}
    return {name: getattr(row, name) for name in names}


def healing_fields(row: Any) -> dict[str, Any]:
    """The hashed fields of a HealingRecord instance (or of a dict from `.values()`), for its hash format
    (`hash_version`, included; 2 when the row has none)."""
    version = _get(row, "hash_version", HEALING_FIRST_VERSION) or HEALING_FIRST_VERSION
    fields = link_fields(row, healing_hashed_fields(version))
    fields["hash_version"] = version
    return fields


def _fields_of(row: Any, revision: bool) -> dict[str, Any]:
    version = _get(row, "hash_version", ENCODING_VERSION) or ENCODING_VERSION
    fields = link_fields(row, hashed_fields(version, revision=revision))
    fields["hash_version"] = version
    return fields


def revision_fields(row: Any) -> dict[str, Any]:
    """The hashed fields of a SpecRevision instance (or of a dict from `.values()`), for its hash format
    (`hash_version`, included)."""
    return _fields_of(row, revision=True)


def row_fields(row: Any) -> dict[str, Any]:
    """The hashed fields of a Transition instance (or of a dict from `.values()`), for its hash format
    (`hash_version`, included)."""
    return _fields_of(row, revision=False)


def link_hash(row: Transition | SpecRevision | HealingRecord) -> str:
    """The hash of a link built in memory (a Transition, SpecRevision or HealingRecord instance), chained onto
    its `prev_hash`, in its own hash format."""
    if isinstance(row, SpecRevision):
        return revision_hash(revision_fields(row), row.prev_hash)
    if isinstance(row, HealingRecord):
        return healing_hash(healing_fields(row), row.prev_hash)
    return transition_hash(row_fields(row), row.prev_hash)
