"""The sandbox's webhook configurations, written by the webhook server itself (`runwebhooks --install`, what
`make run` runs): once it listens, it creates or replaces the generated Mutating/ValidatingWebhookConfigurations
in the cluster with its own URL and its CA as the caBundle, and deletes them when it stops.

In this mode every webhook's `failurePolicy` is `Ignore`: the sandbox never wedges on a webhook server that is
not up (the first seconds of `make run`, or after a crash that left the configurations behind); and objects
labelled `opsconsole.io/admission: skip` pass (the invalid sample, which shows a spec that got past admission).
A cluster's configurations (deploy/webhooks) keep the kinds' own policies.
"""

from __future__ import annotations

import base64
import logging
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


def install(api: Any, url: str, ca_bundle: bytes) -> list[str]:
    """Create or replace the configurations in the cluster, and point the conversion of every registered kind
    with several versions at this server (its CRD's clientConfig: the URL and the CA); returns what was written."""
    written = []
    bundle = base64.b64encode(ca_bundle).decode()
    for rec in registry.registered():
        if rec.versions:
            res = rec.resource
            client_config = {"url": f"{url}/convert/{res.group}/{res.plural}", "caBundle": bundle,
                             "service": None}  # a merge patch: the generated service reference goes
            kube.patch_object(api, CRD, None, f"{res.plural}.{res.group}", {"spec": {"conversion": {
                "strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                                                   "clientConfig": client_config}}}})
            written.append(f"CustomResourceDefinition {res.plural}.{res.group}")
    for doc in sandbox_configurations(url, ca_bundle):
        kind = KINDS[doc["kind"]]
        existing = kube.get_object(api, kind, None, NAME)
        if existing is None:
            kube.create_object(api, kind, doc, field_manager=FIELD_MANAGER)
        else:
            doc["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            kube.replace_object(api, kind, doc)
        written.append(doc["kind"])
    log.info("webhook configurations installed for %s", url)
    return written


def uninstall(api: Any) -> None:
    """Delete the configurations (absent ones are fine)."""
    for kind in KINDS.values():
        kube.delete_object(api, kind, None, NAME)
