"""The canonical encoding shared by the hashed records outside the per-resource chains: the action record's
global chain (`reconcilers.models.actions.ActionRecord`) and a reconcile request's identity
(`ReconcileRequest.identity_hash`). Pure functions (hashlib, json): the models call them at insert time, and
`reconcilers.engine.audit` when it verifies.

Encoding: a JSON object of the named fields (times as UTC ISO-8601 with microseconds, JSON values
normalised through a JSON round trip), plus `prev_hash` where there is a chain, the record's type as `link`
and the format as `v`; keys sorted, no whitespace, UTF-8; the hash is its sha256 in hex.

The action record's format is not stored per row, it follows from the row (issue 41): a record of the default
cluster is hashed in format 1 (ACTION_HASHED_FIELDS, as every record written before there were clusters), a record
of another cluster in format 2, which covers `cluster` too (ACTION_HASHED_FIELDS_V2). Either way the cluster is
covered: a record moved to another cluster (or back to the default one) no longer matches its hash.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from reconcilers.core.clusters import DEFAULT_CLUSTER

#: the fields an action record's hash covers (format 1), with `prev_hash` and `"link": "action"`
ACTION_HASHED_FIELDS: tuple[str, ...] = (
    "seq", "created_at", "actor", "auth", "token_prefix", "action", "method", "path", "target", "reason",
    "outcome", "status_code", "detail", "remote_addr",
)
#: format 2: the record of an action in another cluster than the default also hashes its cluster
ACTION_HASHED_FIELDS_V2: tuple[str, ...] = (*ACTION_HASHED_FIELDS, "cluster")
#: what identifies a reconcile request and never changes (its lifecycle columns do), `"link": "request"`
REQUEST_IDENTITY_FIELDS: tuple[str, ...] = ("id", "key", "token", "actor", "reason", "idempotency_key", "requested_at")


def _value(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("record times must be timezone-aware")
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict | list | tuple):
        return json.loads(json.dumps(value, sort_keys=True, default=str))
    return value


def encode(fields: Mapping[str, Any], names: tuple[str, ...], link: str, prev_hash: str | None = None,
           version: int = 1) -> bytes:
    """The canonical bytes of `names` of `fields` (see the module's docstring)."""
    missing = [name for name in names if name not in fields]
    if missing:
        raise KeyError(f"missing {link} fields: {missing}")
    doc = {name: _value(fields[name]) for name in names}
    if prev_hash is not None:
        doc["prev_hash"] = prev_hash
    doc["link"], doc["v"] = link, version
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _get(row: Any, name: str) -> Any:
    return row[name] if isinstance(row, Mapping) else getattr(row, name)


def action_hash(row: Any, prev_hash: str) -> str:
    """sha256 (hex) of an action record (an instance or a `.values()` dict) chained onto `prev_hash`: format 1
    for a record of the default cluster (or one that names none: rows read before the column existed), format 2,
    with its cluster, for a record of another cluster."""
    cluster = row.get("cluster") if isinstance(row, Mapping) else getattr(row, "cluster", None)
    names, version = ((ACTION_HASHED_FIELDS, 1) if cluster is None or cluster == DEFAULT_CLUSTER
                      else (ACTION_HASHED_FIELDS_V2, 2))
    fields = {name: _get(row, name) for name in names}
    return hashlib.sha256(encode(fields, names, "action", prev_hash, version)).hexdigest()


def request_identity_hash(row: Any) -> str:
    """sha256 (hex) of a reconcile request's identity (an instance or a `.values()` dict)."""
    fields = {name: _get(row, name) for name in REQUEST_IDENTITY_FIELDS}
    return hashlib.sha256(encode(fields, REQUEST_IDENTITY_FIELDS, "request")).hexdigest()
