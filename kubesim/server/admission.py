"""The admission chain: `admissionregistration.k8s.io/v1` MutatingWebhookConfigurations and
ValidatingWebhookConfigurations, called as kube-apiserver calls them for the API requests it serves.

For each create, update, patch or delete of a resource (and its subresources), the webhooks whose rules match are
called with an `AdmissionReview` v1 over HTTPS:

- matching: `rules` (operations, apiGroups, apiVersions, resources with `*`, `res/sub`, `*/sub`, scope),
  `namespaceSelector` (the labels of the object's namespace; of the Namespace itself for namespaces; cluster-scoped
  objects always match), `objectSelector` (the labels of the new or the old object), `matchPolicy` (`Exact`: the
  request's version must be listed; `Equivalent`, the default: any served version of the same resource, the
  object sent with the rule's apiVersion);
- the call: `clientConfig.url`, or `clientConfig.service` resolved to an address kubesim can reach (the
  Service's `kubesim.io/address: host:port` annotation, else an ExternalName Service's name), the server's
  certificate verified against `caBundle` (for a service: for the name `<service>.<namespace>.svc`), kubesim's
  client certificate presented when one is configured (mutual TLS), `timeoutSeconds` (default 10);
- the answer: `response.uid` must be the request's; `allowed: false` refuses the request with the webhook's
  Status (`admission webhook "x" denied the request: ...`, at least 400); a mutating webhook's `JSONPatch` is
  applied; `warnings` reach the client as `Warning` headers;
- the `scale` subresource: UPDATE with the autoscaling/v1 Scale before and after (kind `autoscaling/v1 Scale`);
- failures (no answer, timeout, a bad answer): `failurePolicy: Fail` (the default) refuses with 500
  `failed calling webhook "x": ...`, `Ignore` goes on without it;
- `sideEffects`: a dry-run request refuses webhooks that are not `None` or `NoneOnDryRun`;
- order: mutating webhooks (configurations by name, webhooks in order; `reinvocationPolicy: IfNeeded` ones once
  more when a later webhook changed the object), then the server's own defaulting and validation, then the
  validating webhooks on the object that would be stored.

Writes made by kubesim's own simulated controllers do not go through admission (see the README's limits).
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp

from kubesim import errors
from kubesim.auth.identity import UserInfo
from kubesim.errors import ApiError
from kubesim.meta import clone
from kubesim.patch.jsonpatch import apply_json_patch
from kubesim.selectors import selector_from_label_selector
from kubesim.server.webhook_client import WebhookCallError, webhook_ssl_context, webhook_target

if TYPE_CHECKING:
    from kubesim.registry import ResourceType
    from kubesim.simulator import Simulator

GROUP = "admissionregistration.k8s.io"
MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"
DEFAULT_TIMEOUT = 10
OPERATION_OPTIONS = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


@dataclass
class AdmissionRequest:
    """One API request as admission sees it."""

    rt: ResourceType
    version: str  # the version the client used
    operation: str  # CREATE | UPDATE | DELETE
    namespace: str
    name: str
    subresource: str
    user: UserInfo
    dry_run: bool
    obj: dict[str, Any] | None  # the object in the request's version (None for DELETE)
    old: dict[str, Any] | None
    options: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass
class Hook:
    """One webhook of one configuration, matched to a request."""

    configuration: str
    spec: dict[str, Any]
    version: str  # the version the object is sent in

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "")


def _matches_list(values: list[str] | None, wanted: str) -> bool:
    values = values or []
    return "*" in values or wanted in values


def _resource_matches(resources: list[str] | None, resource: str, subresource: str) -> bool:
    for pattern in resources or []:
        base, _, sub = pattern.partition("/")
        if base not in ("*", resource):
            continue
        if (sub == "" and subresource == "") or sub == "*" or sub == subresource:
            return True
    return False


class AdmissionChain:
    """Finds and calls the webhooks that apply to a request."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.calls = 0  # webhook calls made (for tests and stats)
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        """Close the kept-alive connections (when the server stops)."""
        if self._session is not None and not self._session.closed:
            await self._session.close()

    def _configurations(self, plural: str) -> list[dict[str, Any]]:
        rt = self.sim.cluster.resource(GROUP, plural)
        return sorted(self.sim.cluster.store.items(rt.key), key=lambda c: c["metadata"]["name"])

    def active(self) -> bool:
        """Whether any webhook configuration exists (no work at all otherwise)."""
        return any(self.sim.cluster.store.count(self.sim.cluster.resource(GROUP, p).key) for p in (MUTATING,
                                                                                                   VALIDATING))

    def _rule_version(self, rule: dict[str, Any], req: AdmissionRequest, policy: str) -> str | None:
        """The version the object is sent in when `rule` matches the request, else None."""
        rt = req.rt
        if not _matches_list(rule.get("operations"), req.operation):
            return None
        if not _matches_list(rule.get("apiGroups"), rt.group):
            return None
        if not _resource_matches(rule.get("resources"), rt.plural, req.subresource):
            return None
        scope = rule.get("scope") or "*"
        if scope != "*" and scope != ("Namespaced" if rt.namespaced else "Cluster"):
            return None
        versions = rule.get("apiVersions") or []
        if _matches_list(versions, req.version):
            return req.version
        if policy == "Exact":
            return None
        for version in versions:
            if version in rt.versions:
                return version
        return None

    def _selected(self, hook: dict[str, Any], req: AdmissionRequest) -> bool:
        objects = [o for o in (req.obj, req.old) if o is not None]
        selector = hook.get("objectSelector")
        if selector and not any(selector_from_label_selector(selector)(o) for o in objects):
            return False
        selector = hook.get("namespaceSelector")
        if not selector:
            return True
        if req.rt.group == "" and req.rt.plural == "namespaces":
            return any(selector_from_label_selector(selector)(o) for o in objects)
        if not req.rt.namespaced:
            return True
        ns = self.sim.cluster.find(self.sim.cluster.resource("", "namespaces"), "", req.namespace)
        return ns is not None and selector_from_label_selector(selector)(ns)

    def hooks(self, plural: str, req: AdmissionRequest) -> list[Hook]:
        """The webhooks of the `plural` configurations that apply to `req`, in kube-apiserver's order."""
        found = []
        for configuration in self._configurations(plural):
            for spec in configuration.get("webhooks") or []:
                policy = spec.get("matchPolicy") or "Equivalent"
                version = next((v for rule in spec.get("rules") or []
                                if (v := self._rule_version(rule, req, policy)) is not None), None)
                if version is not None and self._selected(spec, req):
                    found.append(Hook(configuration["metadata"]["name"], spec, version))
        return found

    # -- the calls -----------------------------------------------------------------------------------------

    def _review(self, hook: Hook, req: AdmissionRequest, obj: dict[str, Any] | None) -> dict[str, Any]:
        rt = req.rt

        def as_version(o: dict[str, Any] | None) -> dict[str, Any] | None:
            if o is None:
                return None
            out = clone(o)
            out["apiVersion"] = rt.api_version(hook.version)
            return out

        if req.subresource == "scale":  # the objects are autoscaling/v1 Scales, sent as they are
            def as_version(o: dict[str, Any] | None) -> dict[str, Any] | None:  # noqa: F811
                return clone(o) if o is not None else None

        gvk = ({"group": "autoscaling", "version": "v1", "kind": "Scale"} if req.subresource == "scale" else
               {"group": rt.group, "version": hook.version, "kind": rt.kind})
        gvr = {"group": rt.group, "version": hook.version, "resource": rt.plural}
        body: dict[str, Any] = {
            "uid": str(uuid.uuid4()),
            "kind": gvk, "resource": gvr,
            "requestKind": gvk if req.subresource == "scale" else {**gvk, "version": req.version},
            "requestResource": {**gvr, "version": req.version},
            "name": req.name, "namespace": req.namespace, "operation": req.operation,
            "userInfo": req.user.to_json(), "object": as_version(obj), "oldObject": as_version(req.old),
            "dryRun": req.dry_run,
            "options": {"kind": OPERATION_OPTIONS.get(req.operation, "CreateOptions"),
                        "apiVersion": "meta.k8s.io/v1", **req.options},
        }
        if req.subresource:
            body["subResource"] = body["requestSubResource"] = req.subresource
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}

    async def _call(self, hook: Hook, review: dict[str, Any]) -> dict[str, Any]:
        config = hook.spec.get("clientConfig") or {}
        url, server_name, shown = webhook_target(self.sim, config)
        timeout = int(hook.spec.get("timeoutSeconds") or DEFAULT_TIMEOUT)
        context = webhook_ssl_context(self.sim, config)
        self.calls += 1
        if self._session is None or self._session.closed:  # one session: connections are kept alive
            self._session = aiohttp.ClientSession()
        try:
            async with self._session.post(url, json=review, ssl=context, server_hostname=server_name,
                                          timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                if resp.status != 200:
                    raise WebhookCallError(f'Post "{shown}": the server answered {resp.status}')
                answer = await resp.json(content_type=None)
        except TimeoutError as exc:
            raise WebhookCallError(f'Post "{shown}": context deadline exceeded') from exc
        except (aiohttp.ClientError, ssl.SSLError, OSError, ValueError) as exc:
            raise WebhookCallError(f'Post "{shown}": {exc}') from exc
        response = answer.get("response") if isinstance(answer, dict) else None
        if not isinstance(response, dict):
            raise WebhookCallError("the AdmissionReview answer has no response")
        if response.get("uid") != review["request"]["uid"]:
            raise WebhookCallError(f"expected response.uid=\"{review['request']['uid']}\", got "
                                   f"\"{response.get('uid')}\"")
        return response

    async def _ask(self, hook: Hook, req: AdmissionRequest, obj: dict[str, Any] | None) -> dict[str, Any] | None:
        """The webhook's response, or None when it failed and its failurePolicy is Ignore."""
        if req.dry_run and (hook.spec.get("sideEffects") or "Unknown") not in ("None", "NoneOnDryRun"):
            raise errors.bad_request(f'admission webhook "{hook.name}" has side effects and does not support dry run')
        try:
            response = await self._call(hook, self._review(hook, req, obj))
        except WebhookCallError as exc:
            if (hook.spec.get("failurePolicy") or "Fail") == "Ignore":
                return None
            raise errors.internal_error(f'failed calling webhook "{hook.name}": failed to call webhook: {exc}'
                                        ) from exc
        req.warnings.extend(str(w) for w in response.get("warnings") or [])
        if not response.get("allowed"):
            raise denied(hook.name, response.get("status"))
        return response

    async def mutate(self, req: AdmissionRequest) -> dict[str, Any] | None:
        """Run the mutating webhooks on `req.obj`; returns the object they produced (the same when none
        changed it)."""
        hooks = self.hooks(MUTATING, req)
        obj = req.obj
        if not hooks:
            return obj
        changed_after: dict[int, bool] = {}
        for i, hook in enumerate(hooks):
            changed = False
            obj, changed = await self._mutate_once(hook, req, obj)
            changed_after[i] = False
            if changed:
                for j in range(i):
                    changed_after[j] = True
        for i, hook in enumerate(hooks):  # reinvocation: once, for IfNeeded webhooks a later one overrode
            if changed_after.get(i) and hook.spec.get("reinvocationPolicy") == "IfNeeded":
                obj, _ = await self._mutate_once(hook, req, obj)
        return obj

    async def _mutate_once(self, hook: Hook, req: AdmissionRequest, obj: dict[str, Any] | None
                           ) -> tuple[dict[str, Any] | None, bool]:
        response = await self._ask(hook, req, obj)
        if response is None or not response.get("patch") or obj is None:
            return obj, False
        if (response.get("patchType") or "JSONPatch") != "JSONPatch":
            raise errors.internal_error(f'failed calling webhook "{hook.name}": unsupported patchType '
                                        f'{response.get("patchType")!r}')
        try:
            ops = json.loads(base64.b64decode(response["patch"]))
            patched = apply_json_patch(clone(obj), ops)
        except (ValueError, ApiError) as exc:
            raise errors.internal_error(f'failed calling webhook "{hook.name}": the patch does not apply: {exc}'
                                        ) from exc
        if isinstance(patched, dict):
            patched["apiVersion"] = obj.get("apiVersion", patched.get("apiVersion"))
            patched["kind"] = obj.get("kind", patched.get("kind"))
        return patched, patched != obj

    async def validate(self, req: AdmissionRequest, obj: dict[str, Any] | None) -> None:
        """Run the validating webhooks on `obj` (the object that would be stored), in parallel as
        kube-apiserver does; the first refusal (in webhook order) wins."""
        hooks = self.hooks(VALIDATING, req)
        if not hooks:
            return
        results = await asyncio.gather(*(self._ask(hook, req, obj) for hook in hooks), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result


def denied(name: str, status: dict[str, Any] | None) -> ApiError:
    """kube-apiserver's refusal for a webhook that did not allow the request."""
    status = dict(status or {})
    code = int(status.get("code") or 400)
    code = code if code >= 400 else 400
    prefix = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{prefix}: {status['message']}"
    elif status.get("reason"):
        message = f"{prefix}: {status['reason']}"
    else:
        message = f"{prefix} without explanation"
    return ApiError(code, str(status.get("reason") or ""), message, status.get("details"))
