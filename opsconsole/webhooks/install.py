"""The sandbox's webhook configurations, written by the webhook server itself (`runwebhooks --install`, what
`make run` runs): once it listens, it creates or replaces the generated Mutating/ValidatingWebhookConfigurations
in the cluster with its own URL and its CA as the caBundle, and deletes them when it stops.

In this mode every webhook's `failurePolicy` is `Ignore`: the sandbox never wedges on a webhook server that is
not up (the first seconds of `make run`, or after a crash that left the configurations behind); and objects
labelled `opsconsole.io/admission: skip` pass (the invalid sample, which shows a spec that got past admission).
The `Keeper` looks again every few seconds and writes back what is missing (a CRD that the controller created
after the server started, or re-applied).
A cluster's configurations (deploy/webhooks) keep the kinds' own policies.
"""

from __future__ import annotations

import base64
import logging
import threading
from typing import Any

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import kube, registry
from reconcilers.engine.webhook_config import NAME, webhook_configurations

log = logging.getLogger(__name__)
KINDS = {
    "MutatingWebhookConfiguration": ResourceKind("admissionregistration.k8s.io", "v1",
                                                 "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
                                                 namespaced=False),
    "ValidatingWebhookConfiguration": ResourceKind("admissionregistration.k8s.io", "v1",
                                                   "validatingwebhookconfigurations",
                                                   "ValidatingWebhookConfiguration", namespaced=False),
}
CRD = ResourceKind("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
                   namespaced=False)
FIELD_MANAGER = "opsconsole-webhooks"
#: objects labelled `opsconsole.io/admission: skip` pass the sandbox's webhooks (the invalid sample)
SKIP_LABEL = "opsconsole.io/admission"


def sandbox_configurations(url: str, ca_bundle: bytes) -> list[dict[str, Any]]:
    """The generated configurations pointing at `url`, with `ca_bundle`, every webhook `Ignore`."""
    docs = webhook_configurations(url=url, ca_bundle=ca_bundle)
    for doc in docs:
        doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "opsconsole-runwebhooks"
        for hook in doc["webhooks"]:
            hook["failurePolicy"] = "Ignore"
            hook["objectSelector"] = {"matchExpressions": [{"key": SKIP_LABEL, "operator": "NotIn",
                                                            "values": ["skip"]}]}
    return docs


def _install_conversion(api: Any, url: str, bundle: str, res: ResourceKind) -> bool | None:
    """Point one CRD's conversion at this server; True when written, False when it already was, None when the
    CRD is not there (yet: the controller installs it)."""
    name = f"{res.plural}.{res.group}"
    live = kube.get_object(api, CRD, None, name)
    if live is None:
        return None
    wanted = {"url": f"{url}/convert/{res.group}/{res.plural}", "caBundle": bundle}
    config = (((live.get("spec") or {}).get("conversion") or {}).get("webhook") or {}).get("clientConfig") or {}
    if {k: config.get(k) for k in ("url", "caBundle", "service")} == {**wanted, "service": None}:
        return False
    kube.patch_object(api, CRD, None, name, {"spec": {"conversion": {  # a merge patch: the service reference goes
        "strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                                           "clientConfig": {**wanted, "service": None}}}}},
                      field_manager=FIELD_MANAGER)
    return True


def _wiring(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What of a configuration this server decides (the API server defaults the rest)."""
    return sorted((h.get("name"), (h.get("clientConfig") or {}).get("url"), (h.get("clientConfig") or {}).get(
        "caBundle"), h.get("failurePolicy"), str(h.get("objectSelector"))) for h in doc.get("webhooks") or [])


def _same_configuration(live: dict[str, Any], doc: dict[str, Any]) -> bool:
    return _wiring(live) == _wiring(doc)


def install(api: Any, url: str, ca_bundle: bytes) -> list[str]:
    """Create or replace the configurations in the cluster, and point the conversion of every registered kind
    with several versions at this server (its CRD's clientConfig: the URL and the CA); what was written (nothing
    when all of it was in place already: a look that finds it so costs GETs only). A CRD not created yet is left
    for the next call (`Keeper`)."""
    written = []
    bundle = base64.b64encode(ca_bundle).decode()
    for rec in registry.registered():
        if rec.versions and _install_conversion(api, url, bundle, rec.resource):
            written.append(f"CustomResourceDefinition {rec.resource.plural}.{rec.resource.group}")
    for doc in sandbox_configurations(url, ca_bundle):
        kind = KINDS[doc["kind"]]
        existing = kube.get_object(api, kind, None, NAME)
        if existing is None:
            kube.create_object(api, kind, doc, field_manager=FIELD_MANAGER)
        elif _same_configuration(existing, doc):
            continue
        else:
            doc["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            kube.replace_object(api, kind, doc)
        written.append(doc["kind"])
    if written:
        log.info("webhook wiring installed for %s: %s", url, ", ".join(written))
    return written


class Keeper:
    """Keeps the sandbox wiring in place while the server runs: every `interval` seconds `install` again, which
    writes only what is missing or changed (a CRD the controller created or re-applied after this server started,
    a configuration deleted by hand, a restarted kubesim)."""

    def __init__(self, api: Any, url: str, ca_bundle: bytes, interval: float = 5.0) -> None:
        self.api, self.url, self.ca_bundle, self.interval = api, url, ca_bundle, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="webhook-wiring-keeper", daemon=True)

    def start(self) -> Keeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.interval + 5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                install(self.api, self.url, self.ca_bundle)
            except Exception as exc:  # noqa: BLE001 - a cluster away for a moment: the next look puts it back
                log.warning("webhook wiring not checked: %s", exc)


def uninstall(api: Any) -> None:
    """Delete the configurations (absent ones are fine)."""
    for kind in KINDS.values():
        kube.delete_object(api, kind, None, NAME)
