"""Admission decisions for the registered kinds: what the validating and mutating webhooks answer to an
`AdmissionReview` v1 request (the server is `manage.py runwebhooks`; the configurations come from
`webhook_configurations`).

- Validating: the spec must validate against the spec model of the version the object is in (the kind's
  `spec_model`, or a `KindVersion`'s; each bad field named, as the reconcile would have said after the fact),
  then the kind's `validate(new, old, user)` hook, given both in the storage version, must return no message.
  A refusal is `allowed: false` with a 422 `Invalid` Status naming every field. The spec model and the hook apply
  to a create and to an update that changes the spec (an update of metadata only is admitted); DELETE and the
  `status` and `scale` subresources are always admitted (seen, recorded and noted for the engine, never refused:
  the engine's own status writes and deletions must pass whatever the stored spec is).
- Mutating: the kind's `mutate(obj, user)` hook; the difference is answered as a JSONPatch (RFC 6902, the
  `jsonpatch` package).
- A review that is not the shape kube-apiserver sends (a non-object `request`, `object`, `oldObject`, `userInfo`,
  `metadata`, nesting deeper than `MAX_DEPTH`) is a `ReviewError` (400 for the caller), never a crash.
- A hook that raises is a refusal naming the error (`failurePolicy: Fail`, the default) or, for a kind whose
  `webhook_failure_policy` is `Ignore`, an admission with a warning; either way the decision says so.
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import jsonpatch
from pydantic import ValidationError

from reconcilers.core.clusters import DEFAULT_CLUSTER, key_join
from reconcilers.core.kind import spec_errors
from reconcilers.core.reconciler import AdmissionUser, Reconciler
from reconcilers.engine.conversion import convert_object

VALIDATE, MUTATE = "validate", "mutate"
MAX_DEPTH = 100  # JSON nesting a review may have (kube objects are far shallower; deeper ones would recurse)
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


def object_target(group: str, version: str, plural: str, namespace: str, name: str) -> str:
    """The object's workqueue key, `group/version/plural/namespace/name`: how every action record names its object
    (a reconcile, a suspension, an admission decision), as the console's links and the `target` filter do."""
    return "/".join((group, version, plural, namespace, name))


def legacy_object_target(kind: str, namespace: str, name: str) -> str:
    """`Kind namespace/name` (`Kind name` when cluster-scoped): how admission decisions named their object on
    record before they used the key (`object_target`). Those records stay as they are (`target` is a hashed field
    of the action record's chain): the `target` filter matches both forms."""
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


@dataclass
class Decision:
    """One admission decision, as the webhook answered it and as it goes on record."""

    webhook: str  # validate | mutate
    uid: str  # the AdmissionReview request's uid
    kind: str
    group: str
    namespace: str
    name: str
    operation: str
    user: AdmissionUser
    dry_run: bool
    allowed: bool = True
    code: int = 200
    reasons: list[str] = field(default_factory=list)
    patch: list[dict[str, Any]] = field(default_factory=list)
    hook_error: str = ""
    warnings: list[str] = field(default_factory=list)
    peer_address: str = ""  # the caller's address (the API server's, over mutual TLS)
    peer_cn: str = ""  # the subject CN of the caller's client certificate
    subresource: str = ""
    version: str = ""  # the kind's (storage) version and plural: what its key is made of
    plural: str = ""
    cluster: str = DEFAULT_CLUSTER  # the cluster whose API server asked (the webhook server's --cluster)

    @property
    def target(self) -> str:
        """The object's key, `group/version/plural/namespace/name` (the name may be empty for a create with
        generateName), with its cluster in front outside the default cluster (`key_join`, so the record is filed
        under that cluster); `Kind namespace/name` for a decision queued before decisions carried the plural."""
        if not self.plural:
            return legacy_object_target(self.kind, self.namespace, self.name)
        return key_join(self.cluster, object_target(self.group, self.version, self.plural, self.namespace,
                                                    self.name))

    def response(self) -> dict[str, Any]:
        """The `response` of the AdmissionReview answer."""
        body: dict[str, Any] = {"uid": self.uid, "allowed": self.allowed}
        if not self.allowed:
            body["status"] = {"code": self.code, "reason": "Invalid" if self.code == 422 else "InternalError",
                              "message": "; ".join(self.reasons)}
        if self.patch:
            body["patchType"] = "JSONPatch"
            body["patch"] = base64.b64encode(json.dumps(self.patch).encode()).decode()
        if self.warnings:
            body["warnings"] = list(self.warnings)
        return body

    def to_json(self) -> str:
        """The decision as JSON (`from_json` reads it back): how it waits in the recorder's durable queue."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Decision:
        """A decision written by `to_json`."""
        data = json.loads(text)
        user = data.pop("user")
        return cls(**data, user=AdmissionUser(user["username"], tuple(user["groups"]), user["uid"]))

    def detail(self) -> dict[str, Any]:
        """What the record keeps besides actor, target, outcome and code."""
        return {"uid": self.uid, "webhook": self.webhook, "operation": self.operation, "kind": self.kind,
                "group": self.group, "namespace": self.namespace, "name": self.name,
                "groups": list(self.user.groups), "allowed": self.allowed, "reasons": self.reasons,
                "patch": self.patch, "dryRun": self.dry_run, "hookError": self.hook_error,
                "subresource": self.subresource, "peer": {"address": self.peer_address, "cn": self.peer_cn}}


class ReviewError(ValueError):
    """An AdmissionReview kubesim or kube-apiserver would never send (400 for the webhook's caller)."""


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply `value` nests lists and objects, counted without recursion; stops counting past `limit`."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _must(condition: bool, message: str) -> None:
    if not condition:
        raise ReviewError(message)


def _optional(value: Any, kind: type | tuple[type, ...]) -> bool:
    return value is None or isinstance(value, kind)


def _request(review: Any) -> dict[str, Any]:
    """The review's `request`, checked for the shape kube-apiserver sends (a ReviewError naming what is not)."""
    _must(isinstance(review, dict), "an AdmissionReview must be a JSON object")
    _must(nesting_depth(review) <= MAX_DEPTH, f"the review nests deeper than {MAX_DEPTH} levels")
    request = review.get("request")
    _must(isinstance(request, dict), "not an AdmissionReview v1 request: request must be an object")
    _must(isinstance(request.get("uid"), str) and bool(request.get("uid")),
          "not an AdmissionReview v1 request: request.uid is missing or not a string")
    for key in ("object", "oldObject", "userInfo", "options", "kind", "resource"):
        _must(_optional(request.get(key), dict), f"request.{key}: must be an object")
    for key in ("name", "namespace", "operation", "subResource"):
        _must(_optional(request.get(key), str), f"request.{key}: must be a string")
    _must(not request.get("operation") or request["operation"] in OPERATIONS,
          f"request.operation: must be one of {', '.join(OPERATIONS)}")
    _must(_optional(request.get("dryRun"), bool), "request.dryRun: must be a boolean")
    for key in ("object", "oldObject"):
        obj = request.get(key) or {}
        _must(_optional(obj.get("metadata"), dict), f"request.{key}.metadata: must be an object")
        meta = obj.get("metadata") or {}
        for field_name in ("name", "namespace", "uid"):
            _must(_optional(meta.get(field_name), str), f"request.{key}.metadata.{field_name}: must be a string")
        for field_name in ("labels", "annotations"):
            _must(_optional(meta.get(field_name), dict), f"request.{key}.metadata.{field_name}: must be an object")
    info = request.get("userInfo") or {}
    for key in ("username", "uid"):
        _must(_optional(info.get(key), str), f"request.userInfo.{key}: must be a string")
    _must(_optional(info.get("groups"), list) and all(isinstance(g, str) for g in info.get("groups") or []),
          "request.userInfo.groups: must be a list of strings")
    return request


def _decision(webhook: str, rec: Reconciler, request: dict[str, Any]) -> Decision:
    obj = request.get("object") or request.get("oldObject") or {}
    meta = obj.get("metadata") or {}
    info = request.get("userInfo") or {}
    user = AdmissionUser(str(info.get("username") or ""), tuple(str(g) for g in info.get("groups") or []),
                         str(info.get("uid") or ""))
    return Decision(webhook, str(request["uid"]), rec.resource.kind, rec.resource.group,
                    str(request.get("namespace") or meta.get("namespace") or ""),
                    str(request.get("name") or meta.get("name") or ""), str(request.get("operation") or ""),
                    user, bool(request.get("dryRun")), subresource=str(request.get("subResource") or ""),
                    version=rec.resource.version, plural=rec.resource.plural)


def _hook_failed(decision: Decision, rec: Reconciler, hook: str, exc: Exception) -> None:
    decision.hook_error = f"{type(exc).__name__}: {exc}"
    message = f"the {rec.resource.kind} kind's {hook} hook failed: {decision.hook_error}"
    if getattr(rec, "webhook_failure_policy", "Fail") == "Ignore":
        decision.warnings.append(message)
        return
    decision.allowed, decision.code, decision.reasons = False, 500, [message]


def spec_model_of(rec: Reconciler, api_version: str) -> Any:
    """The spec model of the version an object is in: the kind's for its storage version, a `KindVersion`'s for
    another (None: not validated)."""
    version = api_version.rpartition("/")[2]
    if not version or version == rec.resource.version:
        return rec.spec_model
    return next((v.spec_model for v in rec.versions if v.name == version), None)


def _with_api_version(request: dict[str, Any], obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """`obj` with its apiVersion: its own, else the one the request names (`request.kind`), else none (read as
    the storage version)."""
    if obj is None or obj.get("apiVersion"):
        return obj
    kind = request.get("kind") or {}
    if isinstance(kind, dict) and kind.get("version"):
        group = kind.get("group") or ""
        return {**obj, "apiVersion": f"{group}/{kind['version']}" if group else str(kind["version"])}
    return obj


def _in_storage_version(rec: Reconciler, obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """`obj` as the kind's storage version has it: a kind's `validate` hook sees one shape whatever version the
    client wrote (hub and spoke, reconcilers.engine.conversion); an object that names no version is taken to be
    in it."""
    if obj is None or not rec.versions or not obj.get("apiVersion"):
        return obj
    return convert_object(rec, obj, rec.resource.api_version)


def review_validate(rec: Reconciler, review: dict[str, Any]) -> Decision:
    """The validating webhook's decision on `review` for the kind of `rec`."""
    request = _request(review)
    decision = _decision(VALIDATE, rec, request)
    if decision.operation not in ("CREATE", "UPDATE") or decision.subresource:
        return decision  # DELETE, status, scale: seen and recorded, never refused
    obj = _with_api_version(request, request.get("object")) or {}
    spec = obj.get("spec")
    old_obj = request.get("oldObject")
    spec_changed = decision.operation == "CREATE" or not isinstance(old_obj, dict) or old_obj.get("spec") != spec
    if not spec_changed:  # metadata only (the engine's finalizers and annotations): the stored spec not judged again
        return decision
    reasons: list[str] = []
    if spec is not None and not isinstance(spec, dict):
        reasons.append(f"spec: must be an object (got {type(spec).__name__})")
    elif (model := spec_model_of(rec, str(obj.get("apiVersion") or ""))) is not None:
        try:
            model.model_validate_json(json.dumps(spec or {}))
        except ValidationError as exc:
            reasons.extend(spec_errors(exc))
    if not reasons:
        try:
            new = _in_storage_version(rec, obj)
            old = _in_storage_version(rec, _with_api_version(request, request.get("oldObject")))
            reasons.extend(str(r) for r in rec.validate(new, old, decision.user) or [])
        except Exception as exc:  # noqa: BLE001 - a kind's hook never takes the webhook down
            _hook_failed(decision, rec, "validate", exc)
            return decision
    if reasons:
        decision.allowed, decision.code, decision.reasons = False, 422, reasons
    return decision


def review_mutate(rec: Reconciler, review: dict[str, Any]) -> Decision:
    """The mutating webhook's decision on `review` for the kind of `rec`: its `mutate` hook's changes as a
    JSONPatch."""
    request = _request(review)
    decision = _decision(MUTATE, rec, request)
    obj = request.get("object")
    if decision.operation not in ("CREATE", "UPDATE") or decision.subresource or not isinstance(obj, dict):
        return decision
    try:
        mutated = rec.mutate(copy.deepcopy(obj), decision.user)
    except Exception as exc:  # noqa: BLE001 - as in review_validate
        _hook_failed(decision, rec, "mutate", exc)
        return decision
    if isinstance(mutated, dict):
        decision.patch = jsonpatch.make_patch(obj, mutated).patch
    return decision
