"""Where and how kubesim calls a webhook (admission or CRD conversion), from its `clientConfig`:

- `url` (https only), or `service` (`namespace`, `name`, `port` 443, `path`) resolved to an address kubesim can
  reach: the Service's `kubesim.io/address: host:port` annotation, else an ExternalName Service's name; the
  server's certificate is then verified for `<name>.<namespace>.svc`, as kube-apiserver verifies it;
- the certificate verified against `caBundle` (base64 PEM; the system's roots when empty);
- kubesim's client certificate (`--webhook-client-cert/-key`) presented for mutual TLS when configured.
"""

from __future__ import annotations

import base64
import ssl
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesim.simulator import Simulator

ADDRESS_ANNOTATION = "kubesim.io/address"


class WebhookCallError(Exception):
    """A webhook could not be called or did not answer properly."""


def webhook_target(sim: Simulator, config: dict[str, Any]) -> tuple[str, str | None, str]:
    """(URL to POST to, TLS server name to verify or None for the URL's host, the URL as messages say it)."""
    if config.get("url"):
        url = str(config["url"])
        if not url.startswith("https://"):
            raise WebhookCallError(f'webhook URL "{url}" is not https')
        return url, None, url
    service = config.get("service") or {}
    namespace, name = service.get("namespace") or "", service.get("name") or ""
    port = int(service.get("port") or 443)
    path = service.get("path") or "/"
    shown = f"https://{name}.{namespace}.svc:{port}{path}"
    svc = sim.cluster.find(sim.cluster.resource("", "services"), namespace, name)
    if svc is None:
        raise WebhookCallError(f'Post "{shown}": service "{namespace}/{name}" not found')
    address = ((svc.get("metadata") or {}).get("annotations") or {}).get(ADDRESS_ANNOTATION)
    if not address and (svc.get("spec") or {}).get("type") == "ExternalName":
        address = f"{svc['spec'].get('externalName')}:{port}"
    if not address:
        raise WebhookCallError(f'Post "{shown}": service "{namespace}/{name}" has no address kubesim can reach '
                               f"(annotate it with {ADDRESS_ANNOTATION}: host:port)")
    return f"https://{address}{path}", f"{name}.{namespace}.svc", shown


_CONTEXTS: dict[tuple[str, str | None, str | None], ssl.SSLContext] = {}


def webhook_ssl_context(sim: Simulator, config: dict[str, Any]) -> ssl.SSLContext:
    """The client TLS context for a webhook: its caBundle (the system's roots when empty), kubesim's client
    certificate when configured. Contexts are kept per bundle: loading trust roots costs milliseconds."""
    bundle = str(config.get("caBundle") or "")
    opts = sim.options
    key = (bundle, opts.webhook_client_cert, opts.webhook_client_key)
    context = _CONTEXTS.get(key)
    if context is not None:
        return context
    if bundle:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:
            context.load_verify_locations(cadata=base64.b64decode(bundle).decode())
        except (ValueError, ssl.SSLError) as exc:
            raise WebhookCallError(f"caBundle: {exc}") from exc
    else:
        context = ssl.create_default_context()
    if opts.webhook_client_cert and opts.webhook_client_key:
        context.load_cert_chain(opts.webhook_client_cert, opts.webhook_client_key)
    if len(_CONTEXTS) > 256:
        _CONTEXTS.clear()
    _CONTEXTS[key] = context
    return context
