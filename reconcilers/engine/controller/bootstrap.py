"""`runcontroller --bootstrap` / `--install-crds`: wait for the API, apply the CRDs, wait until each is served,
apply samples.

`install_crds` server-side applies the CRDs generated from the registered kinds (field manager
`opsconsole-controller`, forced): a CRD that differs from what the kind generates is brought in line, so a changed
model reaches the cluster on the next start.

Everything is create-if-missing: an object that exists is left as it is (a bootstrap never overwrites what
a user changed), so running it on every start is safe. Manifests are YAML files (several documents each,
`kind: List` expanded), applied in file-name order, Namespaces first. Kinds are found by discovery, so the
samples may be of any kind the server serves, built-in or custom.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reconcilers.core.reconciler import ResourceKind
from reconcilers.engine import apiclient, kube

log = logging.getLogger(__name__)

CRD = ResourceKind("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
FIELD_MANAGER = "opsconsole-controller"
#: the field manager the samples are created with (their first revision names it)
SAMPLES_FIELD_MANAGER = "opsconsole-samples"


class BootstrapError(RuntimeError):
    """The bootstrap could not complete (API not answering, a CRD never served, an unknown kind)."""


@dataclass
class BootstrapReport:
    """What the bootstrap did: `created` and `existing` list `Kind namespace/name` strings."""

    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    served: list[str] = field(default_factory=list)  # CRD names found served


def wait_for_api(api: Any, timeout: float = 60.0, interval: float = 0.5) -> dict[str, Any]:
    """Poll GET /version until the API answers; its version info. BootstrapError after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return kube.server_version(api)
        except Exception as exc:
            if time.monotonic() >= deadline:
                raise BootstrapError(f"the Kubernetes API did not answer within {timeout:.0f}s: {exc}") from exc
            time.sleep(interval)


def connect(timeout: float = 60.0, interval: float = 0.5, build: Callable[[], Any] | None = None) -> Any:
    """The process's shared ApiClient (or the one `build` makes) once it can be built and the API answers (the
    kubeconfig may not exist yet when the controller starts together with kubesim). BootstrapError after
    `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            api = (build or apiclient.get_api_client)()
        except Exception as exc:  # e.g. the kubeconfig is not written yet
            if time.monotonic() >= deadline:
                raise BootstrapError(f"no Kubernetes client configuration within {timeout:.0f}s: {exc}") from exc
            time.sleep(interval)
            continue
        wait_for_api(api, max(0.0, deadline - time.monotonic()), interval)
        return api


def load_manifests(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The objects in YAML files (in the given order; empty documents skipped, `kind: List` expanded)."""
    out: list[dict[str, Any]] = []
    for path in paths:
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if not doc:
                continue
            if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
                raise BootstrapError(f"{path}: not a Kubernetes object: {str(doc)[:80]!r}")
            if doc["kind"] == "List" and isinstance(doc.get("items"), list):
                out.extend(item for item in doc["items"] if item)
            else:
                out.append(doc)
    return out


def yaml_files(directory: Path | None) -> list[Path]:
    """The *.yaml / *.yml files of a directory, sorted by name (none when it does not exist)."""
    if directory is None or not Path(directory).is_dir():
        return []
    return sorted(p for p in Path(directory).iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def _describe(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {where}{meta.get('name')}"


def apply_objects(
    api: Any, objects: list[dict[str, Any]], report: BootstrapReport, default_namespace: str = "default"
) -> None:
    """Create each object unless it exists (Namespaces first, then in order)."""
    for obj in sorted(objects, key=lambda o: o.get("kind") != "Namespace"):
        kind = kube.kind_for(api, obj["apiVersion"], obj["kind"])
        if kind is None:
            kind = kube.kind_for(api, obj["apiVersion"], obj["kind"], refresh=True)
        if kind is None:
            raise BootstrapError(f"the API serves no {obj['kind']} in {obj['apiVersion']} ({_describe(obj)})")
        obj = dict(obj, metadata=dict(obj.get("metadata") or {}))
        if kind.namespaced:
            obj["metadata"].setdefault("namespace", default_namespace)
        else:
            obj["metadata"].pop("namespace", None)
        _, created = kube.ensure_object(api, kind, obj, field_manager=SAMPLES_FIELD_MANAGER)
        (report.created if created else report.existing).append(_describe(obj))
        log.info("bootstrap: %s %s", _describe(obj), "created" if created else "exists")


def wait_for_crds(api: Any, crds: list[dict[str, Any]], timeout: float = 30.0, interval: float = 0.2) -> list[str]:
    """Wait until each CRD is served; their names. BootstrapError naming the ones that are not."""
    deadline = time.monotonic() + timeout
    pending = {crd["metadata"]["name"]: crd for crd in crds}
    served: list[str] = []
    while pending:
        for name, crd in list(pending.items()):
            if kube.crd_served(api, crd):
                served.append(name)
                del pending[name]
        if not pending:
            break
        if time.monotonic() >= deadline:
            raise BootstrapError(f"CRDs not served after {timeout:.0f}s: {', '.join(sorted(pending))}")
        time.sleep(interval)
    return served


def keep_conversion_wiring(crd: dict[str, Any], live: dict[str, Any] | None) -> dict[str, Any]:
    """`crd` with the live CRD's conversion webhook `clientConfig` when both convert by webhook: where the
    webhook listens and the CA it is trusted by are a deployment's wiring (written by `runwebhooks --install`,
    cert-manager's CA injector or a kustomize patch), not the kind's, and an install must not undo them."""
    def client_config(doc: dict[str, Any] | None) -> dict[str, Any] | None:
        conversion = ((doc or {}).get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") != "Webhook":
            return None
        return (conversion.get("webhook") or {}).get("clientConfig")

    kept = client_config(live)
    if not kept or client_config(crd) is None:
        return crd
    crd = copy.deepcopy(crd)
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = copy.deepcopy(kept)
    return crd


def install_crds(api: Any, crds: list[dict[str, Any]], report: BootstrapReport | None = None,
                 timeout: float = 30.0) -> list[str]:
    """Server-side apply each CRD (created, or brought in line with the manifest) and wait until all are served;
    their names."""
    for crd in crds:
        before = kube.get_object(api, CRD, None, crd["metadata"]["name"])
        crd = keep_conversion_wiring(crd, before)
        kube.apply_object(api, CRD, None, crd["metadata"]["name"], crd, field_manager=FIELD_MANAGER, force=True)
        if report is not None:
            (report.existing if before is not None else report.created).append(_describe(crd))
        log.info("CRD %s %s", crd["metadata"]["name"], "applied" if before is not None else "created")
    return wait_for_crds(api, crds, timeout)


def bootstrap(
    api: Any,
    crds_dir: Path | None,
    samples_dir: Path | None,
    *,
    generated: list[dict[str, Any]] | None = None,
    api_timeout: float = 60.0,
    crd_timeout: float = 30.0,
) -> BootstrapReport:
    """Wait for the API, apply the CRDs (`generated` ones by server-side apply when given, else `crds_dir/*.yaml`
    create-if-missing), wait until they are served, apply `samples_dir/*.yaml`."""
    report = BootstrapReport()
    wait_for_api(api, api_timeout)
    if generated is not None:
        report.served = install_crds(api, generated, report, crd_timeout)
    else:
        crds = load_manifests(yaml_files(crds_dir))
        for crd in crds:
            if crd.get("kind") != "CustomResourceDefinition":
                raise BootstrapError(f"{_describe(crd)} in {crds_dir} is not a CustomResourceDefinition")
            _, created = kube.ensure_object(api, CRD, crd)
            (report.created if created else report.existing).append(_describe(crd))
        report.served = wait_for_crds(api, crds, crd_timeout)
    apply_objects(api, load_manifests(yaml_files(samples_dir)), report)
    return report
