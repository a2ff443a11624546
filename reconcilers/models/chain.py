"""The canonical encoding shared by the hashed records outside the per-resource chains: the action record's
global chain (`reconcilers.models.actions.ActionRecord`) and a reconcile request's identity
(`ReconcileRequest.identity_hash`). Pure functions (hashlib, json): the models call them at insert time, and
`reconcilers.engine.audit` when it verifies.

Encoding: a JSON object of the named fields (times as UTC ISO-8601 with microseconds, JSON values
normalised through a JSON round trip), plus `prev_hash` where there is a chain, the record's type as `link`
and the format as `v`; keys sorted, no whitespace, UTF-8; the hash is its sha256 in hex.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

#: the fields an action record's hash covers (format 1), with `prev_hash` and `"link": "action"`
ACTION_HASHED_FIELDS: tuple[str, ...] = (
    "seq", "created_at", "actor", "auth", "token_prefix", "action", "method", "path", "target", "reason",
    "outcome", "status_code", "detail", "remote_addr",
)
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
    """sha256 (hex) of an action record (an instance or a `.values()` dict) chained onto `prev_hash`."""
    fields = {name: _get(row, name) for name in ACTION_HASHED_FIELDS}
    return hashlib.sha256(encode(fields, ACTION_HASHED_FIELDS, "action", prev_hash)).hexdigest()


def request_identity_hash(row: Any) -> str:
    """sha256 (hex) of a reconcile request's identity (an instance or a `.values()` dict)."""
    fields = {name: _get(row, name) for name in REQUEST_IDENTITY_FIELDS}
    return hashlib.sha256(encode(fields, REQUEST_IDENTITY_FIELDS, "request")).hexdigest()
