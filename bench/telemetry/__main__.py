"""Reconcile throughput with telemetry fully on (tracing: a span per reconcile, per API call and for the
recording, all written to the database span store) versus off (OPSCONSOLE_TRACING=off: the no-op tracer),
metrics counted in both. Run from the repository root:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_telemetry REDIS_URL=redis://127.0.0.1:6379/8 \\
        .venv/bin/python -m bench.telemetry [-n 150] [--rounds 3]

kubesim runs in a subprocess; the runner (`reconcilers.engine.runner.run`, what the Celery task calls) runs
in this process, one reconcile at a time, over `n` fresh Gadget objects per round (each reconcile: GET, add
the finalizer, status write, recording, an Event). Rounds alternate off/on; the median of each is printed
with the ratio on/off, in reconciles per second and in this process's CPU per reconcile (the runner, the
reconcile step, the recording's ORM work and, telemetry on, the span store's thread until it has flushed:
far steadier than the rate on a shared machine, since kubesim and PostgreSQL are other processes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid


def setup_django() -> None:
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("set DATABASE_URL to a PostgreSQL database, e.g. postgres://postgres@127.0.0.1:5432/bench_telemetry")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "opsconsole.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def one_round(api, n: int, traced: bool) -> tuple[float, float]:
    """Reconciles per second over n fresh objects, telemetry on or off, and this process's CPU milliseconds
    per reconcile."""
    from django.conf import settings

    from opsconsole.telemetry.tracing import span_store, tracing_setup, tracing_shutdown
    from reconcilers.engine import dispatch, kube, runner
    from tests.fixtures.cluster import NAMESPACE
    from tests.reconcilers.testkinds import GADGET, gadget

    settings.OPSCONSOLE_TRACING = "on" if traced else "off"
    if traced:
        tracing_setup("opsconsole-bench")
    namespace = f"b-{uuid.uuid4().hex[:8]}"
    kube.create_object(api, NAMESPACE, {"metadata": {"name": namespace}})
    keys = []
    for i in range(n):
        kube.create_object(api, GADGET, gadget(namespace, f"g{i}", mode="ok"))
        keys.append(GADGET.request(namespace, f"g{i}").key())
    queue = dispatch.get_queue()
    t0, cpu0 = time.perf_counter(), time.process_time()
    for key in keys:
        queue.add(key)
        result = runner.run(key)
        assert result == "success", result
    elapsed = time.perf_counter() - t0
    if traced:
        store = span_store()
        assert store is not None and store.force_flush(10000)
        tracing_shutdown()
    return n / elapsed, 1000 * (time.process_time() - cpu0) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=150, help="reconciles per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per mode")
    args = parser.parse_args()
    setup_django()
    from django.conf import settings

    from kubesim.testing import running_kubesim
    from reconcilers.engine import apiclient, dispatch, kube, registry
    from reconcilers.engine.controller.bootstrap import CRD, wait_for_crds
    from reconcilers.models import Span
    from tests.reconcilers import testkinds

    settings.OPSCONSOLE_RECONCILERS = ["tests.reconcilers.testkinds.GadgetReconciler"]
    settings.OPSCONSOLE_BUILTIN_KINDS = False
    settings.OPSCONSOLE_WORKQUEUE_NAME = f"bench-telemetry-{uuid.uuid4().hex[:6]}"
    registry.reset()
    with running_kubesim(mode="process") as sim:
        settings.KUBECONFIG = sim.kubeconfig
        apiclient.reset()
        api = apiclient.get_api_client()
        kube.ensure_object(api, CRD, testkinds.CRD)
        wait_for_crds(api, [testkinds.CRD], timeout=30)
        one_round(api, 20, traced=False)  # warm-up
        spans_before = Span.objects.count()
        off, on, cpu_off, cpu_on = [], [], [], []
        for _ in range(args.rounds):
            rate, cpu = one_round(api, args.n, traced=False)
            off.append(rate)
            cpu_off.append(cpu)
            rate, cpu = one_round(api, args.n, traced=True)
            on.append(rate)
            cpu_on.append(cpu)
        spans = Span.objects.count() - spans_before
        dispatch.get_queue().clear()
    m_off, m_on = statistics.median(off), statistics.median(on)
    print(f"reconciles per round: {args.n}, rounds per mode: {args.rounds}")
    print(f"telemetry off: {m_off:.1f} reconciles/s  (rounds: {', '.join(f'{x:.1f}' for x in off)})")
    print(f"telemetry on:  {m_on:.1f} reconciles/s  (rounds: {', '.join(f'{x:.1f}' for x in on)})")
    print(f"spans stored with telemetry on: {spans} ({spans / (args.n * args.rounds):.1f} per reconcile)")
    print(f"ratio on/off: {m_on / m_off:.3f}  (cost {100 * (1 - m_on / m_off):.1f}%)")
    c_off, c_on = statistics.median(cpu_off), statistics.median(cpu_on)
    print(f"CPU per reconcile, this process: off {c_off:.2f} ms (rounds: {', '.join(f'{x:.2f}' for x in cpu_off)}), "
          f"on {c_on:.2f} ms (rounds: {', '.join(f'{x:.2f}' for x in cpu_on)}); ratio on/off {c_on / c_off:.3f}")


if __name__ == "__main__":
    main()
