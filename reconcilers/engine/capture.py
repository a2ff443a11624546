"""The inputs of one run, kept for a replay: `InputCapture` watches the step's requests (a `requestwatch.RequestWatch`
that changes none) and, only when the run is kept, `pack()`s what the step read into compressed JSON.

What is kept: the object as read and the phase on record, every object and list the step read (GET), every child
it applied as the API returned it (or as the object cache had it, for an apply not sent), the kind's API version
and the operator version, and the outcome the run reached (phase, result, queue action, the children's applied
digests) that a replay is compared with. Objects are kept without `managedFields`. A Secret's `data` and
`stringData` are never kept: only their keys, each with the SHA-256 of its value (`sha256:<hex>` in place of the
value). Past `max_bytes` of JSON only the object, the phase on record and the outcome are kept (`truncated`).

While the run goes on, the capture only holds references to the answers it was handed (no copy, no encoding): a
run that is not kept costs a list append per request.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from reconcilers.core.meta import APPLIED_DIGEST

#: the format of packed inputs
FORMAT = 1
#: the default bound on the inputs' JSON before compression
MAX_BYTES = 512 * 1024


@dataclass
class Packed:
    """Packed inputs: the compressed bytes, the JSON's size and whether it was cut to the object alone."""

    data: bytes
    size: int
    truncated: bool


@dataclass
class InputCapture:
    """The reads (and the children's applies) of one step, by reference (see the module docstring)."""

    answers: list[tuple[str, str, Any]] = field(default_factory=list)

    def query(self, method: str, path: str, query: dict[str, Any] | None) -> dict[str, Any] | None:
        return query

    def answered(self, method: str, path: str, body: Any, answer: Any, error: Exception | None) -> None:
        if error is None and isinstance(answer, dict) and method in ("GET", "PATCH", "PUT", "POST"):
            self.answers.append((method, path, answer))

    def reads(self, own_path: str) -> list[dict[str, Any]]:
        """What the step read and applied, as (path, object | items) records: the object's own requests and Events
        left out (the object is kept as read, separately)."""
        out = []
        for method, path, answer in self.answers:
            if path == own_path or path.startswith(own_path + "/") or "/events" in path:
                continue
            secret = "/secrets" in path
            if method == "GET" and isinstance(answer.get("items"), list):
                out.append({"path": path, "items": [slim(o, secret) for o in answer["items"] if isinstance(o, dict)]})
            elif answer.get("metadata"):
                out.append({"path": path, "object": slim(answer, secret)})
        return out


def slim(obj: dict[str, Any], secret: bool = False) -> dict[str, Any]:
    """An object as kept: without managedFields; a Secret's values (`secret`, or its kind says so) replaced by their
    SHA-256."""
    meta = obj.get("metadata") or {}
    out = dict(obj)
    if "managedFields" in meta:
        out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    if secret or obj.get("kind") == "Secret":
        for name in ("data", "stringData"):
            if isinstance(obj.get(name), dict):
                out[name] = {k: _hashed(v) for k, v in obj[name].items()}
    return out


def _hashed(value: Any) -> str:
    return "sha256:" + hashlib.sha256(str(value).encode()).hexdigest()


def outcome_summary(outcome: Any, recorded: str | None) -> dict[str, Any]:
    """What a run concluded, as a replay compares it: the phase it recorded (None: left alone), the result, the queue
    action and each child applied (kind, namespace, name, the applied manifest's digest)."""
    children = []
    for child in getattr(outcome, "children", []) or []:
        meta = child.get("metadata") or {}
        children.append({"apiVersion": child.get("apiVersion") or "", "kind": child.get("kind") or "",
                         "namespace": meta.get("namespace") or "", "name": meta.get("name") or "",
                         "digest": (meta.get("annotations") or {}).get(APPLIED_DIGEST, "")})
    change = getattr(outcome, "change", None)
    return {"phase": change.to_phase if change is not None else None, "recorded": recorded or "",
            "result": outcome.result, "queue": outcome.queue.name,
            "error": f"{outcome.error_class}: {outcome.error_message}" if outcome.error_class else "",
            "children": children, "applied": [slim(c) for c in getattr(outcome, "children", []) or []]}


def pack(capture: InputCapture, *, key: str, kind_version: str, operator_version: str, obj: dict[str, Any],
         recorded: str | None, own_path: str, outcome: Any, max_bytes: int = MAX_BYTES) -> Packed:
    """The kept inputs, compressed (see the module docstring)."""
    summary = outcome_summary(outcome, recorded)
    doc: dict[str, Any] = {"format": FORMAT, "key": key, "kind_version": kind_version,
                           "operator_version": operator_version, "recorded": recorded or "", "object": slim(obj),
                           "reads": capture.reads(own_path), "outcome": summary, "truncated": False}
    text = json.dumps(doc, separators=(",", ":"), default=str)
    if len(text) > max_bytes:
        doc.update(reads=[], truncated=True, outcome={**summary, "applied": []})
        text = json.dumps(doc, separators=(",", ":"), default=str)
    return Packed(zlib.compress(text.encode(), 6), len(text), bool(doc["truncated"]))


def unpack(data: bytes) -> dict[str, Any]:
    """Packed inputs back as a dict (ValueError when they are not ones)."""
    try:
        doc = json.loads(zlib.decompress(bytes(data)).decode())
    except (zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the kept inputs are not readable: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError("the kept inputs are in an unknown format")
    return doc
