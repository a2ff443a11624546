"""Who made a write the engine meets: its own (proven by what its writes returned), a user the API server
authenticated (an admitted write), or only a field-manager name (a claim).

The engine never recognises itself by a name: any client may send `--field-manager=opsconsole-controller`. It
recognises its own writes by what they returned:

- **Status writes** (`note_written` / `engine_wrote_checker`): right after a run's status write returns with a
  phase other than the one on record, the runner notes (resourceVersion, phase) of that write on a small
  per-object Redis key in the workqueue's Redis, signed with a key derived from the installation's secret (one
  SET with an expiry, only on a write that changes the phase, never read on the hot path). A later run that
  finds a live phase other than the one on record reads the note: the phase is the engine's (a run wrote it and
  died before its record: caught up) only when the note verifies and names that phase at a resourceVersion not
  newer than the live one. Anything else is an out-of-band change, whatever managedFields say.
- **Spec writes of a rollback**: the rollback records the generation its own PUT returned (`Resource.rollback`);
  the revision of exactly that generation is the rollback's (`revision_actor`), any other is not, whoever's
  field manager `opsconsole-rollback` is on it.

A write that is not the engine's gets its actor from the webhook server's admitted writes
(`reconcilers.engine.admitted`): the newest signed entry matching what the engine sees makes the actor
`kube:<username>`; without one the field manager stays a claim (`manager:<name>`), and a deletion without one
is `unknown`. These lookups run only when the engine meets a write that is not its own (a foreign phase, a new
spec generation, an annotation request, a suspension, a deletion), never on an ordinary run. They read the
admitted writes of the run's cluster (`in_cluster`, set by the run around its work; a deletion recorded outside
a run passes its row's cluster): a write admitted by another cluster's webhook server is never credited here.

The vocabulary is `reconcilers.core.actors`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.conf import settings

from reconcilers.core import actors
from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.core.meta import last_writer, parse_rfc3339
from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import admitted
from reconcilers.engine.step.outcome import EventSpec, OutOfBand

#: the per-object note of the engine's last phase-changing status write: `<resourceVersion> <phase>`
WROTE_PREFIX = "opsconsole:wrote:"
#: how long a note is kept: a run that died before its record is followed by the next run within seconds
WROTE_TTL_SECONDS = 7 * 24 * 3600
#: how much older than the managedFields time of a write its admitted entry may be (clocks differ; whole seconds)
SINCE_SLACK_SECONDS = 60.0
#: the ActionRecord `auth` of an annotation request, by how its actor was established (the column holds 16)
AUTH_ADMISSION = "kube-admission"
AUTH_CLAIM = "manager-claim"

log = logging.getLogger(__name__)
_clients: dict[tuple[int, str], Any] = {}
_lock = threading.Lock()
#: the cluster whose admitted writes the lookups read: the run's (`in_cluster`)
_cluster: ContextVar[str] = ContextVar("opsconsole_provenance_cluster", default=DEFAULT_CLUSTER)


# -- the engine's own status writes --------------------------------------------------------------------------


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _not_newer(version: str, than: str) -> bool:
    """Whether resourceVersion `version` is at most `than` (numeric ones compared, opaque ones only when equal)."""
    if version.isdigit() and than.isdigit():
        return int(version) <= int(than)
    return version == than


def _note_key() -> bytes:
    """The key notes are signed with, derived from the installation's secret (another context than admitted
    writes'), so that someone who can write to Redis but does not hold the secret cannot make a phase the engine's."""
    return hmac.new(str(settings.SECRET_KEY).encode(), b"opsconsole.wrote.v1", hashlib.sha256).digest()


def _note_sig(uid: str, resource_version: str, phase: str) -> str:
    return hmac.new(_note_key(), f"{uid}\n{resource_version}\n{phase}".encode(), hashlib.sha256).hexdigest()[:32]


def note_written(client: Any, uid: str, resource_version: str, phase: str) -> None:
    """Note (signed) that the engine's status write of object `uid` returned `resource_version` with `phase`
    (best effort: without the note a run that dies before its record leaves an out-of-band change, never a
    forgery)."""
    if not uid or not resource_version or not phase:
        return
    try:
        client.set(f"{WROTE_PREFIX}{uid}", f"{resource_version} {_note_sig(uid, resource_version, phase)} {phase}",
                   ex=WROTE_TTL_SECONDS)
    except Exception:  # noqa: BLE001 - Redis away: the record follows at once; only a crash before it loses
        log.warning("could not note the status write of %s", uid, exc_info=True)


def written_note(client: Any, uid: str) -> tuple[str, str] | None:
    """(resourceVersion, phase) of the engine's last phase-changing status write of `uid`, or None (none, or one
    whose signature does not verify)."""
    try:
        raw = client.get(f"{WROTE_PREFIX}{uid}")
    except Exception:  # noqa: BLE001 - nothing proven
        return None
    if not raw:
        return None
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    version, _, rest = text.partition(" ")
    sig, _, phase = rest.partition(" ")
    if not version or not phase or not hmac.compare_digest(sig, _note_sig(uid, version, phase)):
        return None
    return version, phase


def wrote_it(note: tuple[str, str] | None, obj: dict[str, Any]) -> bool:
    """Whether `note` proves the live `obj`'s status.phase is the engine's: the note names that phase, at a
    resourceVersion not newer than the live one (a later write of someone else's leaves another phase)."""
    phase = str((obj.get("status") or {}).get("phase") or "")
    return note is not None and bool(phase) and note[1] == phase and _not_newer(note[0], _rv(obj))


def engine_wrote_checker(client: Any) -> Callable[[dict[str, Any]], bool]:
    """`step.reconcile_step`'s `engine_wrote`: reads the object's note (only called when the live phase is not
    the one on record)."""
    def check(obj: dict[str, Any]) -> bool:
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        return bool(uid) and wrote_it(written_note(client, uid), obj)

    return check


# -- admitted writes -------------------------------------------------------------------------------------------


def _client() -> Any:
    """A Redis client on settings.REDIS_URL, where the webhook server notes admitted writes (one per process)."""
    import redis

    ident = (os.getpid(), settings.REDIS_URL)
    with _lock:
        client = _clients.get(ident)
        if client is None:
            client = _clients[ident] = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2.0,
                                                            socket_connect_timeout=2.0)
        return client


@contextmanager
def in_cluster(cluster: str) -> Iterator[None]:
    """Within it, the admitted writes looked up are `cluster`'s (a run of a key of that cluster)."""
    token = _cluster.set(cluster or DEFAULT_CLUSTER)
    try:
        yield
    finally:
        _cluster.reset(token)


def current_cluster() -> str:
    """The cluster whose admitted writes are looked up here (`in_cluster`; the default cluster outside one)."""
    return _cluster.get()


def admitted_entry(kind: ResourceKind, namespace: str, name: str, uid: str,
                   match: Callable[[dict[str, Any]], bool], *, client: Any = None,
                   since: float | None = None, cluster: str | None = None) -> dict[str, Any] | None:
    """The newest signed admitted write of this object in `cluster` (default: `current_cluster()`) that
    `match`es (`admitted.admitted_find`), or None."""
    try:
        key = admitted.signing_key(settings.SECRET_KEY)
        return admitted.admitted_find(client or _client(), key, kind.group, kind.kind, namespace or "", name,
                                      match=match, uid=uid, since=since, cluster=cluster or current_cluster())
    except Exception:  # noqa: BLE001 - nobody established: the claim stands
        log.warning("admitted writes of %s/%s not read", namespace, name, exc_info=True)
        return None


def entry_actor(entry: dict[str, Any] | None) -> str | None:
    """`kube:<username>` of an admitted entry, None without one (or without a username)."""
    username = str(((entry or {}).get("user") or {}).get("username") or "")
    return actors.kube_actor(username) if username else None


def written_since(obj: dict[str, Any], path: tuple[str, ...]) -> float | None:
    """How far back an admitted entry may be to be the write of the field at `path`: the time managedFields give
    its last write, less `SINCE_SLACK_SECONDS` (the API server's and the webhook server's clocks differ, and
    managedFields keep whole seconds); None without one. An older entry of the same content (the engine's own
    write of that phase long ago, an earlier user's spec) is not taken for it."""
    moment = parse_rfc3339((last_writer(obj, path) or {}).get("time"))
    return moment.timestamp() - SINCE_SLACK_SECONDS if moment is not None else None


def status_actor(kind: ResourceKind, obj: dict[str, Any], phase: str, manager: str) -> tuple[str, dict | None]:
    """The actor of a status phase the engine did not write: the admitted `status` write of that phase
    (`kube:<user>`, noted around the time managedFields give), else the field manager as a claim. With the
    entry (None for a claim)."""
    meta = obj.get("metadata") or {}
    entry = admitted_entry(kind, meta.get("namespace") or "", meta.get("name") or "", str(meta.get("uid") or ""),
                           lambda e: e.get("operation") == "UPDATE" and e.get("subresource") == "status"
                           and e.get("phase") == phase, since=written_since(obj, ("status", "phase")))
    return entry_actor(entry) or actors.manager_claim(manager), entry


def spec_actor(kind: ResourceKind, live: dict[str, Any], manager: str) -> tuple[str, dict | None]:
    """The actor of a spec generation the engine did not write: the admitted CREATE / UPDATE of exactly that
    spec (`kube:<user>`), else the field manager as a claim ('' when managedFields name none)."""
    meta = live.get("metadata") or {}
    digest = admitted.spec_digest(live.get("spec"))
    entry = admitted_entry(kind, meta.get("namespace") or "", meta.get("name") or "", str(meta.get("uid") or ""),
                           lambda e: e.get("operation") in ("CREATE", "UPDATE") and not e.get("subresource")
                           and e.get("spec") == digest, since=written_since(live, ("spec",)))
    claim = actors.manager_claim(manager) if manager else ""
    return entry_actor(entry) or claim, entry


def annotation_actor(kind: ResourceKind, obj: dict[str, Any], annotation: str, value: str | None,
                     manager: str, *, since: float | None = None) -> tuple[str, dict | None]:
    """The actor of an annotation's value (None: its removal) the engine did not write: the admitted CREATE /
    UPDATE that wrote it (`kube:<user>`; with `since`, noted at or after it), else the field manager as a
    claim."""
    meta = obj.get("metadata") or {}

    def match(entry: dict[str, Any]) -> bool:
        values = entry.get("annotations") if isinstance(entry.get("annotations"), dict) else {}
        return (entry.get("operation") in ("CREATE", "UPDATE") and not entry.get("subresource")
                and values.get(annotation) == (value[:256] if value is not None else None))

    if value is not None:
        derived = written_since(obj, ("metadata", "annotations", annotation))
        since = max(since, derived) if since is not None and derived is not None else since or derived
    entry = admitted_entry(kind, meta.get("namespace") or "", meta.get("name") or "", str(meta.get("uid") or ""),
                           match, since=since)
    return entry_actor(entry) or actors.manager_claim(manager), entry


def deletion_actor(kind: ResourceKind, namespace: str, name: str, uid: str, cluster: str | None = None) -> str:
    """The actor of an object's deletion in `cluster` (default: `current_cluster()`): the admitted DELETE
    (`kube:<user>`), else `unknown` (never the engine: it deletes nothing it reconciles)."""
    entry = admitted_entry(kind, namespace, name, uid, lambda e: e.get("operation") == "DELETE", cluster=cluster)
    return entry_actor(entry) or actors.UNKNOWN


def revision_actor(kind: ResourceKind, live: dict[str, Any], manager: str, rollback: dict[str, Any] | None
                   ) -> tuple[str, dict | None]:
    """The actor of a spec revision: the rollback's (`rollback:auto`, `rollback:user:<name>`) when the revision
    is the generation the rollback's own write returned, else `spec_actor`."""
    generation = int((live.get("metadata") or {}).get("generation") or 0)
    if rollback and rollback.get("actor") and int(rollback.get("generation") or 0) == generation > 0:
        return str(rollback["actor"]), None
    return spec_actor(kind, live, manager)


def outcome_noted(client: Any, kind: ResourceKind, obj: dict[str, Any], recorded: str | None, outcome: Any) -> None:
    """After `step.reconcile_step`, before the record: note the run's own status write when it moved the phase
    off the one on record (`note_written`); the change into the terminating phase a deletion request starts
    (reason `Deleting`) gets the deleter as actor (`deletion_actor`: `kube:<user>` or `unknown`); and who wrote
    an out-of-band phase is established (`status_actor`: `outcome.out_of_band` gets `kube:<user>` from an
    admitted write; otherwise its field manager stays a claim)."""
    written = getattr(outcome, "written", None)
    if written and written[1] and written[1] != (recorded or ""):
        note_written(client, str((outcome.obj.get("metadata") or {}).get("uid") or ""), *written)
    change = getattr(outcome, "change", None)
    if change is not None and change.reason == "Deleting" and (obj.get("metadata") or {}).get("deletionTimestamp"):
        meta = obj.get("metadata") or {}  # the deletion request is the deleter's, not the engine's
        actor = deletion_actor(kind, meta.get("namespace") or "", meta.get("name") or "", str(meta.get("uid") or ""))
        outcome.change = dataclasses.replace(change, actor=actor)
    foreign = getattr(outcome, "out_of_band", None)
    if foreign is not None and not foreign.established_by:
        actor, entry = status_actor(kind, obj, foreign.phase, foreign.manager)
        if entry is not None:
            outcome.out_of_band = dataclasses.replace(foreign, established_by=actor)


def out_of_band_event(foreign: OutOfBand, anomaly_id: int) -> EventSpec:
    """The Warning a recorded out-of-band phase posts on the object: who wrote it (established or claimed) and the
    anomaly it is on record as."""
    return EventSpec("Warning", "OutOfBandStatusChange",
                     f"status.phase {foreign.phase} was not written by the engine (by {foreign.actor}; anomaly "
                     f"{anomaly_id}); not recorded as a transition")


def kind_of(obj: dict[str, Any]) -> ResourceKind:
    """The kind of an object as the API returned it (group and kind from its apiVersion and kind: what the
    admitted writes are filed under)."""
    api_version = str(obj.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    return ResourceKind(group, version, "", str(obj.get("kind") or ""))
