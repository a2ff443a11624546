"""Admitted writes: who the API server said made each write to a registered kind, for the engine to name.

The webhook server's validating webhook sees every CREATE, UPDATE (the object, `status`, `scale`) and DELETE of a
registered kind, with the `userInfo` the API server authenticated, over mutual TLS. Before it answers, it notes
each admitted, non-dry-run write here (`admitted_commands`, in the decision's own round trip): a short entry on
a per-object Redis list (newest first, `KEEP` entries, `TTL_SECONDS`), signed with a key derived from the
installation's secret so that someone who can write to Redis but does not hold the secret cannot make the engine
name a person. The engine, when it meets a
write it did not make (a phase it did not write, a spec revision, a manual-reconcile or suspension annotation, a
deletion), looks up the newest entry whose content matches what it sees (`admitted_find`); a match makes the
actor `kube:<username>` (established by admission), no match leaves the field-manager name as a claim.

An entry (`entry_from_request`): `at` (unix seconds), `operation`, `subresource`, `objectUid`, `user`
({username, groups, uid}), `phase` (the written status.phase), `spec` (a digest of the written spec), `annotations`
(the opsconsole and Flux annotations' values), `peer` ({address, cn}: the caller's address and client certificate
subject), outside the default cluster `cluster` (its name, signed with the rest), `sig`.

Per cluster: each cluster has its own webhook server (`runwebhooks --cluster NAME`), which notes its cluster's
writes on lists of that cluster (`object_key`: the default cluster's lists keep the form they always had, another
cluster's name its cluster first), and the engine looks in the lists of the run's cluster only, so the same
namespace/name in two clusters never shares an entry and a write admitted in one is never credited to the other.

No Django, no web project: the caller passes the Redis client and the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

from reconcilers.core.clusters import DEFAULT_CLUSTER

KEEP = 32
TTL_SECONDS = 24 * 3600
PREFIX = "opsconsole:admitted:"
#: the annotations whose values an entry keeps (manual reconcile, suspension, automatic rollback, Flux's request)
ANNOTATION_PREFIXES = ("opsconsole.io/", "reconcile.fluxcd.io/")


def signing_key(secret: str | bytes) -> bytes:
    """The key entries are signed with, derived from the installation's secret (Django's SECRET_KEY)."""
    raw = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(raw, b"opsconsole.admitted.v1", hashlib.sha256).digest()


def object_key(group: str, kind: str, namespace: str, name: str, cluster: str = DEFAULT_CLUSTER) -> str:
    """The Redis list of one object's admitted writes in `cluster`: `<prefix>group/kind/namespace/name` in the
    default cluster (as before clusters), `<prefix>cluster/group/kind/namespace/name` in another (one part more:
    neither a group nor a namespace nor a name holds a '/', so the two forms never meet)."""
    local = f"{group}/{kind}/{namespace}/{name}"
    return f"{PREFIX}{local}" if cluster == DEFAULT_CLUSTER else f"{PREFIX}{cluster}/{local}"


def spec_digest(spec: Any) -> str:
    """A digest of a spec (canonical JSON), to match an admitted write to the spec the engine sees."""
    text = json.dumps(spec if spec is not None else {}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _canonical(entry: dict[str, Any]) -> bytes:
    return json.dumps({k: v for k, v in entry.items() if k != "sig"}, sort_keys=True,
                      separators=(",", ":"), default=str).encode()


def entry_from_request(request: dict[str, Any], peer: dict[str, str] | None = None,
                       at: float | None = None) -> dict[str, Any]:
    """The entry of an AdmissionReview `request` (unsigned): what the engine needs to match the write it
    later sees, and who made it."""
    obj = request.get("object") if isinstance(request.get("object"), dict) else None
    old = request.get("oldObject") if isinstance(request.get("oldObject"), dict) else None
    shown = obj or old or {}
    meta = shown.get("metadata") if isinstance(shown.get("metadata"), dict) else {}
    info = request.get("userInfo") if isinstance(request.get("userInfo"), dict) else {}
    groups = info.get("groups") if isinstance(info.get("groups"), list) else []
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    status = shown.get("status") if isinstance(shown.get("status"), dict) else {}
    return {
        "at": round(at if at is not None else time.time(), 3),
        "operation": str(request.get("operation") or ""),
        "subresource": str(request.get("subResource") or ""),
        "objectUid": str(meta.get("uid") or ""),
        "user": {"username": str(info.get("username") or ""), "groups": [str(g) for g in groups][:32],
                 "uid": str(info.get("uid") or "")},
        "phase": str(status.get("phase") or "") if obj is not None else "",
        "spec": spec_digest(obj.get("spec")) if obj is not None else "",
        "annotations": {str(k): str(v)[:256] for k, v in annotations.items()
                        if str(k).startswith(ANNOTATION_PREFIXES)},
        "peer": {"address": str((peer or {}).get("address") or ""), "cn": str((peer or {}).get("cn") or "")},
    }


def sign(entry: dict[str, Any], key: bytes) -> dict[str, Any]:
    """`entry` with its signature."""
    return {**entry, "sig": hmac.new(key, _canonical(entry), hashlib.sha256).hexdigest()}


def verified(entry: Any, key: bytes) -> bool:
    """Whether `entry` carries a valid signature under `key`."""
    if not isinstance(entry, dict) or not isinstance(entry.get("sig"), str):
        return False
    return hmac.compare_digest(entry["sig"], hmac.new(key, _canonical(entry), hashlib.sha256).hexdigest())


def admitted_commands(pipe: Any, key: bytes, group: str, kind: str, namespace: str, name: str,
                      entry: dict[str, Any], cluster: str = DEFAULT_CLUSTER) -> None:
    """Add to the Redis pipeline `pipe` the commands that put a signed entry on the object's list in `cluster`
    (push, trim, expire); the caller executes it (the webhook server: with the decision's own push, one round
    trip)."""
    redis_key = object_key(group, kind, namespace, name, cluster)
    if cluster != DEFAULT_CLUSTER:  # signed with its cluster: moved onto another cluster's list, it is not found
        entry = {**entry, "cluster": cluster}
    pipe.lpush(redis_key, json.dumps(sign(entry, key), separators=(",", ":")))
    pipe.ltrim(redis_key, 0, KEEP - 1)
    pipe.expire(redis_key, TTL_SECONDS)


def admitted_note(client: Any, key: bytes, group: str, kind: str, namespace: str, name: str,
                  entry: dict[str, Any], cluster: str = DEFAULT_CLUSTER) -> None:
    """Put a signed entry on the object's list in `cluster` (one round trip: `admitted_commands` on a pipeline of
    its own)."""
    pipe = client.pipeline(transaction=True)
    admitted_commands(pipe, key, group, kind, namespace, name, entry, cluster)
    pipe.execute()


def admitted_find(client: Any, key: bytes, group: str, kind: str, namespace: str, name: str, *,
                  match: Callable[[dict[str, Any]], bool], uid: str = "", since: float | None = None,
                  cluster: str = DEFAULT_CLUSTER) -> dict[str, Any] | None:
    """The newest verified entry of the object in `cluster` (its list only, and signed as that cluster's) for
    which `match(entry)` holds (and, with `uid`, whose object uid is that one or unknown; with `since`, noted at
    or after it), or None. An entry whose signature does not verify is skipped, never trusted."""
    try:
        raw = client.lrange(object_key(group, kind, namespace, name, cluster), 0, KEEP - 1)
    except Exception:  # noqa: BLE001 - Redis away: nobody established, the claim stands
        return None
    for item in raw:
        try:
            entry = json.loads(item)
        except (TypeError, ValueError):
            continue
        if not verified(entry, key) or (entry.get("cluster") or DEFAULT_CLUSTER) != cluster:
            continue
        if uid and entry.get("objectUid") not in ("", uid):
            continue
        if since is not None and float(entry.get("at") or 0) < since:
            continue
        if match(entry):
            return entry
    return None
