"""Admission latency through kubesim: creating a Memcached with the opsconsole webhooks configured (validating
from the spec model and the kind's hook, mutating from its hook: two TLS calls to `runwebhooks`' server) against
the same create with no webhook, in the same process, interleaved; p50/p99 of each and the webhooks' own share.

Run: ``OPSCONSOLE_DATA_DIR=/tmp/bench-admission .venv/bin/python -m bench.admission [--creates 300]``.
Needs a database for the decisions (the embedded SQLite by default; migrate first: ``manage.py migrate``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid

import django


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=300, help="creates of each sort (default 300)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    settings.OPSCONSOLE_RECONCILERS = ["tests.reconcilers.testkinds.AdmittedMemcachedReconciler"]
    settings.OPSCONSOLE_BUILTIN_KINDS = False
    settings.OPSCONSOLE_KIND_ENTRY_POINTS = False
    from kubesim.testing import running_kubesim
    from opsconsole.testing.cluster import CrdInstaller
    from opsconsole.webhooks.server import WebhookServer, tls_context
    from opsconsole.webhooks.tls import ensure_certificates, ensure_client_certificates
    from reconcilers.core.reconciler import ResourceKind
    from reconcilers.engine import kube, registry
    from reconcilers.engine.webhook_config import webhook_configurations
    from reconcilers.kinds.memcached import MEMCACHED, MemcachedReconciler
    from tests.reconcilers.testkinds import AdmittedMemcachedReconciler

    registry.reset()
    cert_dir = tempfile.mkdtemp(prefix="bench-admission-")
    files = ensure_certificates(cert_dir, ("localhost",))
    client = ensure_client_certificates(cert_dir)  # mutual TLS, as in production: kubesim presents it
    server = WebhookServer(tls_context(str(files.cert), str(files.key), str(client.ca_cert)))
    server.start()
    kinds = {"Mutating": ResourceKind("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                                      "MutatingWebhookConfiguration", False),
             "Validating": ResourceKind("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                                        "ValidatingWebhookConfiguration", False)}
    namespace_kind = ResourceKind("", "v1", "namespaces", "Namespace", False)
    with running_kubesim(mode="process", controllers=False, webhook_client_cert=str(client.cert),
                         webhook_client_key=str(client.key)) as sim:
        api = kube.build_api_client(sim.kubeconfig)
        CrdInstaller(api).ensure([MemcachedReconciler])
        hooked, plain = "hooked", "plain"
        for ns in (hooked, plain):
            kube.create_object(api, namespace_kind, {"metadata": {"name": ns}})
        for doc in webhook_configurations([AdmittedMemcachedReconciler()], url=server.url(),
                                          ca_bundle=files.ca_pem()):
            for hook in doc["webhooks"]:  # only the hooked namespace's creates go through the webhooks
                hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": hooked}}
            kube.create_object(api, kinds[doc["kind"].removesuffix("WebhookConfiguration")], doc)
        timings: dict[str, list[float]] = {hooked: [], plain: []}
        for i in range(args.creates * 2):
            ns = hooked if i % 2 == 0 else plain
            body = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
                    "metadata": {"name": f"m-{uuid.uuid4().hex[:10]}", "namespace": ns}, "spec": {"size": 1}}
            started = time.perf_counter()
            kube.create_object(api, MEMCACHED, body)
            timings[ns].append(time.perf_counter() - started)
        api.close()
    server.stop()
    print(f"admission through kubesim, {args.creates} creates each, interleaved")
    for name, values in timings.items():
        p50_ms, p99_ms = statistics.median(values) * 1000, _percentile(values, 99) * 1000
        print(f"  {name:7s} p50 {p50_ms:6.2f} ms   p99 {p99_ms:6.2f} ms")
    p50 = statistics.median(timings[hooked]) - statistics.median(timings[plain])
    p99 = _percentile(timings[hooked], 99) - _percentile(timings[plain], 99)
    print(f"  the webhooks' share (validating + mutating, TLS): p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms; "
          f"ratio hooked/plain at p50 x{statistics.median(timings[hooked]) / statistics.median(timings[plain]):.2f}")
    print(f"  decisions written: {server.recorder.written}")


if __name__ == "__main__":
    main()
