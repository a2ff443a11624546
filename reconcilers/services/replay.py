"""Replay: re-execute a kept run's step offline, with today's code, against a kubesim seeded with the inputs the run
read (`reconcilers.engine.capture`), and say whether it reaches the same outcome: the phase it records, the result
and queue action, and the children it applies (each by the digest of its applied manifest; a child whose manifest
changed is shown field by field). `manage.py replay RUN_ID` and the pytest plugin's `replay_run(...)` call it.

The sandbox is a kubesim of its own in a thread (no simulated controllers: nothing moves the seeded objects), loaded
from a snapshot of the kept objects as they were (their uids and resourceVersions), the kind's CRD as today's code
generates it. The children are seeded as the recorded run left them (the answer to its apply): re-applying the same
manifest changes nothing, a changed manifest shows. Secrets hold the hashes of their values, never the values.

Refusals say why: a run with no kept inputs, inputs gone past their retention (never replayed as empty), inputs cut
to the object alone (too big to keep whole), a kind no longer registered, and a kind version that today's code no
longer serves (the version it needs is named).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from reconcilers.core.crd import crd_manifest
from reconcilers.core.meta import now_rfc3339
from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.engine import kube, registry, step, versions
from reconcilers.engine.capture import outcome_summary
from reconcilers.engine.whatif import Change, comparable, diff

log = logging.getLogger(__name__)

CRD = ResourceKind("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)


class ReplayRefused(Exception):
    """The run cannot be replayed: `why` (no_run, not_kept, gone, truncated, unknown_kind, version_gone) and a
    message that says what is needed."""

    def __init__(self, why: str, message: str) -> None:
        super().__init__(message)
        self.why = why


@dataclass
class ChildDifference:
    """A child whose applied manifest differs between the recorded run and the replay (or is only in one)."""

    kind: str
    namespace: str
    name: str
    change: str  # changed, only_recorded, only_replayed
    fields: list[Change] = field(default_factory=list)


@dataclass
class ReplayReport:
    """What the replay reached against what the run recorded."""

    run_id: int | None
    key: str
    kind_version: str
    recorded_operator_version: str
    operator_version: str
    recorded: dict[str, Any]
    replayed: dict[str, Any]
    same: bool
    differences: list[str] = field(default_factory=list)
    children: list[ChildDifference] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """The report as plain JSON-able data."""
        return asdict(self)


def run_replay(run_id: int, reconciler: Reconciler | None = None) -> ReplayReport:
    """Replay run `run_id` from its kept inputs (`reconciler`: today's code for the kind by default)."""
    from reconcilers.engine.capture_store import CaptureMissing, capture_inputs  # the database: only here

    try:
        kept = capture_inputs(run_id)
    except CaptureMissing as exc:
        raise ReplayRefused(exc.why, str(exc)) from exc
    report = replay_inputs(kept.inputs, reconciler)
    report.run_id = run_id
    return report


def _today(inputs: dict[str, Any], reconciler: Reconciler | None) -> Reconciler:
    key = str(inputs.get("key") or "")
    wanted = str(inputs.get("kind_version") or "")
    if reconciler is None:
        try:
            reconciler = registry.for_key(key)
        except (registry.UnknownKind, ValueError) as exc:
            raise ReplayRefused("unknown_kind", f"the run needs the kind of {key} at {wanted}, which no registered "
                                                f"reconciler serves here: {exc}") from exc
    kind = reconciler.resource
    served = [kind.version, *(v.name for v in getattr(reconciler, "versions", ()) or ())]
    group, _, version = wanted.rpartition("/")
    if wanted and (group != kind.group or version not in served):
        raise ReplayRefused("version_gone", f"the run needs {kind.kind} {wanted}; today's code serves "
                                            f"{', '.join(f'{kind.group}/{v}' for v in served)}: replay it with the "
                                            f"operator version that served {wanted} "
                                            f"({inputs.get('operator_version') or 'unknown'})")
    return reconciler


def replay_inputs(inputs: dict[str, Any], reconciler: Reconciler | None = None) -> ReplayReport:
    """Replay kept inputs (see the module docstring)."""
    if inputs.get("truncated"):
        raise ReplayRefused("truncated", "the run's inputs were too big to keep whole: only the object was kept, "
                                         "which is not enough to replay it")
    rec = _today(inputs, reconciler)
    started = time.monotonic()
    obj, recorded = inputs["object"], inputs.get("recorded") or None
    with _sandbox(rec, _seed(rec, inputs)) as api:
        outcome = step.reconcile_step(rec, api, obj, recorded)
        replayed = outcome_summary(outcome, recorded)
    report = _compare(inputs, replayed)
    report.operator_version = _operator_version(rec)
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _operator_version(rec: Reconciler) -> str:
    try:
        return versions.operator_version(rec)
    except Exception:  # noqa: BLE001 - no Django settings (a kind author's test process): the kind's distribution
        return ""


def _compare(inputs: dict[str, Any], replayed: dict[str, Any]) -> ReplayReport:
    recorded = inputs["outcome"]
    differences = [f"{name}: recorded {recorded.get(name)!r}, replayed {replayed.get(name)!r}"
                   for name in ("phase", "result", "queue") if recorded.get(name) != replayed.get(name)]

    def ident(c: dict[str, Any]) -> tuple[str, str, str]:
        return c["kind"], c["namespace"], c["name"]

    before = {ident(c): c for c in recorded.get("children") or []}
    after = {ident(c): c for c in replayed.get("children") or []}
    applied_before = {ident(_ident_of(c)): c for c in recorded.get("applied") or []}
    applied_after = {ident(_ident_of(c)): c for c in replayed.get("applied") or []}
    children = []
    for name in sorted(set(before) | set(after)):
        if name not in after:
            children.append(ChildDifference(*name, "only_recorded"))
        elif name not in before:
            children.append(ChildDifference(*name, "only_replayed"))
        elif before[name]["digest"] != after[name]["digest"]:
            fields, _more = diff(comparable(applied_before.get(name)), comparable(applied_after.get(name)))
            children.append(ChildDifference(*name, "changed", fields))
    differences += [f"child {c.kind} {c.namespace + '/' if c.namespace else ''}{c.name}: {c.change.replace('_', ' ')}"
                    for c in children]
    strip = {k: v for k, v in replayed.items() if k != "applied"}
    return ReplayReport(None, str(inputs.get("key") or ""), str(inputs.get("kind_version") or ""),
                        str(inputs.get("operator_version") or ""), "",
                        {k: v for k, v in recorded.items() if k != "applied"}, strip, not differences, differences,
                        children)


def _ident_of(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    return {"kind": obj.get("kind") or "", "namespace": meta.get("namespace") or "", "name": meta.get("name") or ""}


def _group_plural(path: str) -> tuple[str, str] | None:
    """(group, plural) of a REST path, or None."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"]:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if len(rest) >= 3 and rest[0] == "namespaces":
        return group, rest[2]
    return (group, rest[0]) if rest else None


def _seed(rec: Reconciler, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The snapshot records (group, resource, object) of everything the run read or applied, the object last."""
    records: dict[tuple[str, str, str, str], dict[str, Any]] = {}

    def put(group: str, plural: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("name"):
            records[(group, plural, meta.get("namespace") or "", meta["name"])] = obj

    for read in inputs.get("reads") or []:
        where = _group_plural(read.get("path") or "")
        if where is None:
            continue
        for obj in read.get("items") or ([read["object"]] if read.get("object") else []):
            put(*where, obj)
    kinds = {(k.api_version, k.kind): k for k in rec.owns}
    for child in (inputs.get("outcome") or {}).get("applied") or []:
        kind = kinds.get((child.get("apiVersion") or "", child.get("kind") or ""))
        if kind is not None:
            put(kind.group, kind.plural, child)
    put(rec.resource.group, rec.resource.plural, inputs["object"])
    namespaces = {ns for (_g, _p, ns, _n) in records if ns}
    for ns in namespaces - {n for (g, p, _ns, n) in records if (g, p) == ("", "namespaces")}:
        put("", "namespaces", {"apiVersion": "v1", "kind": "Namespace", "status": {"phase": "Active"},
                               "metadata": {"name": ns, "uid": str(uuid.uuid4()), "resourceVersion": "1",
                                            "creationTimestamp": now_rfc3339()}})
    return [{"group": g, "resource": p, "object": o} for (g, p, _ns, _n), o in records.items()]


class _sandbox:
    """A kubesim of its own loaded with `objects`, the kind's CRD served; the API client to it."""

    def __init__(self, rec: Reconciler, objects: list[dict[str, Any]]) -> None:
        self.rec, self.objects = rec, objects

    def __enter__(self) -> Any:
        from kubesim.testing import running_kubesim

        self.tmp = tempfile.TemporaryDirectory(prefix="opsconsole-replay-")
        counter = 10
        for record in self.objects:
            rv = str((record["object"].get("metadata") or {}).get("resourceVersion") or "0")
            counter = max(counter, int(rv) + 10 if rv.isdigit() else counter)
        with open(os.path.join(self.tmp.name, "snapshot.json"), "w", encoding="utf-8") as out:
            json.dump({"resourceVersion": counter, "objects": self.objects}, out)
        logging.getLogger("kubesim").setLevel(logging.WARNING)
        self.running = running_kubesim(data_dir=self.tmp.name, controllers=False)
        handle = self.running.__enter__()
        self.api = kube.build_api_client(handle.kubeconfig)
        crd = crd_manifest(type(self.rec))
        kube.apply_object(self.api, CRD, None, crd["metadata"]["name"], crd, field_manager="opsconsole-replay")
        deadline = time.monotonic() + 20
        while not self._served():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the replay's kubesim did not serve {crd['metadata']['name']}")
            time.sleep(0.02)
        return self.api

    def _served(self) -> bool:
        """Whether the kind's storage version answers a list (its other versions may need a conversion webhook,
        which the sandbox does not run: the step reads the storage version only)."""
        kind = self.rec.resource
        try:
            kube.list_objects(self.api, kind, limit=1)
        except kube.ApiException:
            return False
        return True

    def __exit__(self, *exc: object) -> None:
        try:
            self.api.close()
        finally:
            self.running.__exit__(None, None, None)
            self.tmp.cleanup()
