"""What if: the kind's real step run against the live cluster with a candidate spec, every write a server-side dry
run, so that nothing is stored (`what_if(reconciler, api, live, spec, recorded) -> WhatIf`).

1. The candidate is sent as an update of the object with `dryRun=All`: the API server validates it (the CRD's
   schema) and runs admission on it, webhooks included, and answers with the object it would store (its new
   generation) or the refusal (422 Invalid with a cause per field, 403/400 from a webhook). A refusal ends here:
   `WhatIf.refused` with the causes as admission gave them.
2. `step.reconcile_step` runs on that object, inside a `requestwatch` watch that sends every write (children's
   applies, a finalizer patch, the status write, Events) with `dryRun=All` and notes each write's verdict. The
   object cache of children is not used: every apply is sent, so the server says what each child would become.
3. Each child the step applied is compared with the live one (a GET: none when it would be created).

The answer is the spec diff, the phase the run would record (and the transitions from the phase on record), the
result and queue action, each child's diff, every write's admission verdict and the error, if any. A cluster that
refuses dry run (a webhook with side effects, a server without it) is `WhatIf.dry_run_refused`, never a write.
No Django: the service (`reconcilers.services.whatif`) reads the record and authorises; this module only runs.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from reconcilers.core.meta import APPLIED_DIGEST, now_rfc3339
from reconcilers.core.reconciler import Reconciler, ResourceKind
from reconcilers.engine import jsonfast, kube, requestwatch, step

log = logging.getLogger(__name__)

#: metadata that every write changes or the server owns: not part of a child's diff
VOLATILE_METADATA = ("resourceVersion", "managedFields", "generation", "creationTimestamp", "uid")
#: at most this many changes per diff (a diff past it says how many more)
MAX_CHANGES = 200
_DRY_RUN_WORDS = ("dry run", "dryrun", "dry-run", "sideeffects")


@dataclass
class Change:
    """One field that differs: its path (`spec.replicas`, `spec.containers[0].image`), before and after (None:
    absent)."""

    path: str
    before: Any
    after: Any


@dataclass
class Verdict:
    """What the API server (validation and admission) answered to one dry-run write."""

    method: str
    path: str
    allowed: bool
    code: int
    message: str = ""


@dataclass
class ChildDiff:
    """One child the step applied: `create` (none live), `update` (changes listed) or `unchanged`."""

    kind: str
    namespace: str
    name: str
    action: str
    changes: list[Change] = field(default_factory=list)
    truncated: int = 0


@dataclass
class WhatIf:
    """The preview of one candidate spec (see the module docstring)."""

    key: str
    spec_diff: list[Change] = field(default_factory=list)
    recorded_phase: str = ""
    phase: str = ""
    reason: str = ""
    message: str = ""
    transitions: list[str] = field(default_factory=list)
    transition_refused: bool = False
    result: str = ""
    queue: str = ""
    generation: int = 0
    children: list[ChildDiff] = field(default_factory=list)
    admission: list[Verdict] = field(default_factory=list)
    #: the spec was refused by validation or admission: `causes` name each field
    refused: bool = False
    causes: list[dict[str, str]] = field(default_factory=list)
    #: the cluster refused to dry-run a write: nothing was previewed past it
    dry_run_refused: bool = False
    error: str = ""
    previewed_at: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The preview as plain JSON-able data."""
        return asdict(self)


class DryRunRefused(Exception):
    """The API server would not dry-run a write (so the preview stopped before sending it for real)."""


class DryRunWatch:
    """A `requestwatch.RequestWatch` that sends every write with `dryRun=All` and notes each write's verdict."""

    def __init__(self) -> None:
        self.verdicts: list[Verdict] = []

    def query(self, method: str, path: str, query: dict[str, Any] | None) -> dict[str, Any] | None:
        if method in requestwatch.READS:
            return query
        return {**(query or {}), "dryRun": "All"}

    def answered(self, method: str, path: str, body: Any, answer: Any, error: Exception | None) -> None:
        if method in requestwatch.READS:
            return
        if error is None:
            self.verdicts.append(Verdict(method, path, True, 200))
            return
        code = int(getattr(error, "status", 0) or 0)
        self.verdicts.append(Verdict(method, path, False, code, _message(error)))


def diff(before: Any, after: Any, prefix: str = "", limit: int = MAX_CHANGES) -> tuple[list[Change], int]:
    """The fields that differ between two JSON values, by path (lists of the same length item by item); at most
    `limit` of them, and how many more there were."""
    out: list[Change] = []
    more = 0

    def walk(a: Any, b: Any, path: str) -> None:
        nonlocal more
        if a == b:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for name in sorted(set(a) | set(b)):
                walk(a.get(name), b.get(name), f"{path}.{name}" if path else str(name))
            return
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{path}[{i}]")
            return
        if len(out) < limit:
            out.append(Change(path, a, b))
        else:
            more += 1

    walk(before, after, prefix)
    return out, more


def comparable(obj: dict[str, Any] | None) -> dict[str, Any]:
    """An object without what every write changes (its volatile metadata, the engine's manifest digest)."""
    if not obj:
        return {}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in VOLATILE_METADATA}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != APPLIED_DIGEST}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return {**obj, "metadata": meta}


def _message(error: Exception) -> str:
    """The message of an API error (the Status's `message`), else its text."""
    body = getattr(error, "body", None)
    if body:
        try:
            decoded = jsonfast.loads(body)
            if isinstance(decoded, dict) and decoded.get("message"):
                return str(decoded["message"])[:2000]
        except ValueError:
            pass
    return str(error)[:2000]


def _causes(error: Exception) -> list[dict[str, str]]:
    """The causes of a refusal (422 Invalid: one per field; a webhook's denial: its message)."""
    body = getattr(error, "body", None)
    causes: list[dict[str, str]] = []
    try:
        decoded = jsonfast.loads(body) if body else {}
    except ValueError:
        decoded = {}
    for cause in ((decoded.get("details") or {}).get("causes") or []) if isinstance(decoded, dict) else []:
        causes.append({"field": str(cause.get("field") or ""), "reason": str(cause.get("reason") or ""),
                       "message": str(cause.get("message") or "")})
    return causes or [{"field": "spec", "reason": str(getattr(error, "reason", "") or ""), "message": _message(error)}]


def _refuses_dry_run(error: Exception) -> bool:
    """Whether an API error says the server will not dry-run the write."""
    text = _message(error).lower()
    return int(getattr(error, "status", 0) or 0) in (400, 403, 405, 501) and any(w in text for w in _DRY_RUN_WORDS)


def what_if(reconciler: Reconciler, api: Any, live: dict[str, Any], spec: Any, recorded: str | None) -> WhatIf:
    """Preview `spec` for the live object `live` (its phase on record `recorded`): see the module docstring."""
    kind = reconciler.resource
    meta = live.get("metadata") or {}
    namespace, name = meta.get("namespace") or "", meta["name"]
    out = WhatIf(key=kind.request(namespace, name).key(), recorded_phase=recorded or "", previewed_at=now_rfc3339())
    out.spec_diff, _more = diff(live.get("spec"), spec, "spec")  # as given, until the server defaults it
    watch = DryRunWatch()
    with requestwatch.watching(watch):
        body = {**live, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}, "spec": spec}
        try:
            candidate = kube.request_json(api, "PUT", kube.object_path(kind, namespace or None, name), body=body)
        except kube.ApiException as exc:
            out.admission = watch.verdicts
            if _refuses_dry_run(exc):
                out.dry_run_refused, out.error = True, f"the cluster refused a dry run: {_message(exc)}"
            elif exc.status in (400, 403, 422):
                out.refused, out.causes, out.error = True, _causes(exc), _message(exc)
            else:
                out.error = f"ApiException {exc.status}: {_message(exc)}"
            return out
        out.generation = int((candidate.get("metadata") or {}).get("generation") or 0)
        out.spec_diff, _more = diff(live.get("spec"), candidate.get("spec"), "spec")  # with the server's defaults
        outcome = step.reconcile_step(reconciler, api, candidate, recorded)
    out.admission = watch.verdicts
    refused_dry = next((v for v in watch.verdicts if not v.allowed and _refuses_dry_run_verdict(v)), None)
    if refused_dry is not None:
        out.dry_run_refused = True
        out.error = f"the cluster refused a dry run of {refused_dry.method} {refused_dry.path}: {refused_dry.message}"
    elif outcome.error_class:
        out.error = f"{outcome.error_class}: {outcome.error_message}"
    change = outcome.change
    current = (live.get("status") or {}).get("phase") or ""
    out.phase = change.to_phase if change is not None else (recorded or current)
    out.reason = change.reason if change is not None else ""
    out.message = change.message if change is not None else ""
    out.transitions = [f"{t.from_phase or '(none)'} → {t.to_phase}" for t in outcome.transitions]
    out.transition_refused = outcome.refused
    out.result, out.queue = outcome.result, outcome.queue.name
    out.children = _children(api, outcome.children, reconciler)
    return out


def _refuses_dry_run_verdict(verdict: Verdict) -> bool:
    text = verdict.message.lower()
    return verdict.code in (400, 403, 405, 501) and any(w in text for w in _DRY_RUN_WORDS)


def _children(api: Any, applied: list[dict[str, Any]], reconciler: Reconciler) -> list[ChildDiff]:
    """Each child applied (the last apply of each), against the live one."""
    last: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for child in applied:
        meta = child.get("metadata") or {}
        last[(child.get("apiVersion") or "", child.get("kind") or "", meta.get("namespace") or "",
              meta.get("name") or "")] = child
    out = []
    for (api_version, kind_name, namespace, name), would in last.items():
        kind = _kind(api, reconciler, api_version, kind_name)
        live = kube.get_object(api, kind, namespace or None, name) if kind is not None else None
        if live is None:
            out.append(ChildDiff(kind_name, namespace, name, "create",
                                 diff({}, comparable(would))[0]))
            continue
        changes, more = diff(comparable(live), comparable(would))
        out.append(ChildDiff(kind_name, namespace, name, "update" if changes else "unchanged", changes, more))
    return out


def _kind(api: Any, reconciler: Reconciler, api_version: str, kind_name: str) -> ResourceKind | None:
    for kind in reconciler.owns:
        if kind.api_version == api_version and kind.kind == kind_name:
            return kind
    return kube.kind_for(api, api_version, kind_name)
