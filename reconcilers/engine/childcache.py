"""Server-side applies of children that would change nothing are not sent (`EngineContext.apply_child`).

The second run of a Memcached (its Deployment became ready) applied its Deployment and its Service again, two PATCHes
that changed nothing. controller-runtime's reconcilers avoid them by comparing with the informer's cache; this module
is that comparison, exact for server-side apply:

- The applied manifest carries its digest in an annotation (`APPLIED_DIGEST`, `with_digest`).
- A live child that carries the digest of the manifest about to be applied was last applied, by this field manager,
  with this very manifest: the manager owns exactly the manifest's fields, so the apply would remove none.
- If it also has every value the manifest names (`apply_unchanged`: dicts by key, lists element by element and of
  the same length), the apply would set none. It would change nothing, and the live child is its answer.

A value the API server normalises (a quantity written `1000m`, a list it sorts) reads as a difference, so that
apply is sent, as it would be without the cache. The live child comes from a `ChildCache`: the object cache the
controller keeps from its informers (`reconcilers.engine.objectcache.ChildCache`), which this module, imported by the
reconcile step, knows only as the protocol below (no Django, no Redis).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from reconcilers.core.meta import APPLIED_DIGEST


class ChildCache(Protocol):
    """The children as an informer last saw them, by reconcile key (`group/version/plural/namespace/name`)."""

    def get(self, key: str) -> dict[str, Any] | None:
        """The child under `key` (None: not known, or the cache is not kept now)."""

    def put(self, key: str, obj: dict[str, Any]) -> None:
        """The child as the run just wrote it (the cache moves forward to it, never back)."""


def manifest_digest(manifest: dict[str, Any]) -> str:
    """The digest of a manifest as applied (canonical JSON; its own `APPLIED_DIGEST` annotation left out)."""
    meta = dict(manifest.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != APPLIED_DIGEST}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    canonical = json.dumps({**manifest, "metadata": meta}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def with_digest(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest with its digest in the `APPLIED_DIGEST` annotation (a new dict; metadata copied)."""
    meta = dict(manifest.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), APPLIED_DIGEST: manifest_digest(manifest)}
    return {**manifest, "metadata": meta}


def _same_value(live: Any, want: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(live, dict) and all(
            live.get(k) is None if v is None else (k in live and _same_value(live[k], v)) for k, v in want.items())
    if isinstance(want, list):
        return (isinstance(live, list) and len(live) == len(want)
                and all(_same_value(a, b) for a, b in zip(live, want, strict=True)))
    if isinstance(want, bool) or isinstance(live, bool):
        return live is want
    return bool(live == want)


def apply_unchanged(manifest: dict[str, Any], live: dict[str, Any] | None) -> bool:
    """Whether server-side applying `manifest` (as `with_digest` made it) to `live` would change nothing: `live`
    exists, is not being deleted, was last applied with this very manifest (its digest annotation), and has
    every value the manifest names."""
    if not live or (live.get("metadata") or {}).get("deletionTimestamp"):
        return False
    wanted = ((manifest.get("metadata") or {}).get("annotations") or {}).get(APPLIED_DIGEST)
    held = ((live.get("metadata") or {}).get("annotations") or {}).get(APPLIED_DIGEST)
    return bool(wanted) and wanted == held and _same_value(live, manifest)
