"""CRD conversion by webhook (`spec.conversion.strategy: Webhook`), as kube-apiserver does it: an object read or
written in a version other than the storage version is sent in a `ConversionReview` (apiextensions.k8s.io/v1) to
the CRD's `spec.conversion.webhook.clientConfig` (see kubesim.server.webhook_client), and the converted object
comes back in `response.convertedObjects`.

The answer is checked as kube-apiserver checks it: the response `uid` is the request's, `result.status` is
`Success`, one object per object sent, each in the desired apiVersion, with the same kind, name, namespace and
uid (a webhook may change labels and annotations only of the metadata). A failure is a 500 for the request:
`conversion webhook for <group>/<version>, Kind=<kind> failed: ...`.

`strategy: None` (the default) keeps kubesim's conversion: only `apiVersion` changes.

The call is synchronous (reads convert objects one at a time, inside the serving loop) and is limited to 30 s.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.parse
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.meta import clone
from kubesim.server.webhook_client import WebhookCallError, webhook_ssl_context, webhook_target

if TYPE_CHECKING:
    from kubesim.registry import ResourceType
    from kubesim.simulator import Simulator

TIMEOUT = 30.0
_KEPT_METADATA = ("name", "namespace", "uid")


class ConversionWebhook:
    """Converts the objects of one CRD through its conversion webhook."""

    def __init__(self, sim: Simulator, crd: dict[str, Any]) -> None:
        self.sim = sim
        spec = crd["spec"]
        self.group = spec["group"]
        self.kind = spec["names"]["kind"]
        self.config = ((spec.get("conversion") or {}).get("webhook") or {}).get("clientConfig") or {}
        self.calls = 0

    def _failed(self, api_version: str, why: str) -> errors.ApiError:
        return errors.internal_error(f"conversion webhook for {api_version}, Kind={self.kind} failed: {why}")

    def convert(self, obj: dict[str, Any], api_version: str) -> dict[str, Any]:
        """`obj` in `api_version` (unchanged when it already is)."""
        if obj.get("apiVersion") == api_version:
            return obj
        review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                  "request": {"uid": str(uuid.uuid4()), "desiredAPIVersion": api_version, "objects": [obj]}}
        try:
            url, server_name, shown = webhook_target(self.sim, self.config)
            context = webhook_ssl_context(self.sim, self.config)
            answer = self._post(url, server_name, shown, context, review)
        except WebhookCallError as exc:
            raise self._failed(str(obj.get("apiVersion")), str(exc)) from exc
        response = answer.get("response") if isinstance(answer, dict) else None
        if not isinstance(response, dict) or response.get("uid") != review["request"]["uid"]:
            raise self._failed(str(obj.get("apiVersion")), "the ConversionReview answer has no response with the "
                                                            "request's uid")
        result = response.get("result") or {}
        if result.get("status") != "Success":
            raise self._failed(str(obj.get("apiVersion")), str(result.get("message") or "conversion failed"))
        converted = response.get("convertedObjects") or []
        if len(converted) != 1 or not isinstance(converted[0], dict):
            raise self._failed(str(obj.get("apiVersion")), f"expected 1 converted object, got {len(converted)}")
        out = converted[0]
        if out.get("apiVersion") != api_version or out.get("kind") != obj.get("kind"):
            raise self._failed(str(obj.get("apiVersion")), f"invalid converted object: expected apiVersion "
                                                            f"{api_version} and kind {obj.get('kind')}")
        meta, before = out.get("metadata") or {}, obj.get("metadata") or {}
        for key in _KEPT_METADATA:
            if meta.get(key) != before.get(key):
                raise self._failed(str(obj.get("apiVersion")), f"invalid converted object: metadata.{key} "
                                                                "must not change")
        merged = clone(before)  # only labels and annotations may come from the webhook
        for key in ("labels", "annotations"):
            if key in meta:
                merged[key] = meta[key]
            else:
                merged.pop(key, None)
        out = dict(out)
        out["metadata"] = merged
        return out

    def _post(self, url: str, server_name: str | None, shown: str, context: ssl.SSLContext,
              review: dict[str, Any]) -> Any:
        self.calls += 1
        parts = urllib.parse.urlsplit(url)
        conn = _Connection(parts.hostname or "", parts.port or 443, context, server_name or parts.hostname or "")
        try:
            conn.request("POST", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                         body=json.dumps(review).encode(), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                raise WebhookCallError(f'Post "{shown}": the server answered {resp.status}')
            return json.loads(body or b"{}")
        except TimeoutError as exc:
            raise WebhookCallError(f'Post "{shown}": context deadline exceeded') from exc
        except (OSError, ValueError, http.client.HTTPException) as exc:
            raise WebhookCallError(f'Post "{shown}": {exc}') from exc
        finally:
            conn.close()


class _Connection(http.client.HTTPSConnection):
    """HTTPS to an address, verifying the certificate for `server_name` (a Service's DNS name)."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext, server_name: str) -> None:
        super().__init__(host, port, timeout=TIMEOUT, context=context)
        self._server_name = server_name
        self._tls = context

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self._server_name)


def conversion_functions(sim: Simulator, crd: dict[str, Any], rt: ResourceType
                         ) -> tuple[Callable[[dict[str, Any], str], dict[str, Any]],
                                    Callable[[dict[str, Any]], dict[str, Any]]] | None:
    """(convert_out, convert_in) for a CRD whose conversion strategy is Webhook (None otherwise)."""
    conversion = crd["spec"].get("conversion") or {}
    if conversion.get("strategy") != "Webhook":
        return None
    webhook = ConversionWebhook(sim, crd)

    def convert_out(obj: dict[str, Any], version: str) -> dict[str, Any]:
        return webhook.convert(obj, rt.api_version(version))

    def convert_in(obj: dict[str, Any]) -> dict[str, Any]:
        return webhook.convert(obj, rt.api_version(rt.storage_version))

    return convert_out, convert_in
