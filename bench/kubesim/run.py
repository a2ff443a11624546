"""kubesim throughput and watch fan-out latency.

Starts ``python -m kubesim`` in a subprocess (no simulated controllers, bearer-token auth on, plain HTTP)
and drives it with an aiohttp client over keep-alive connections:

- GET of one ConfigMap among 1000, status PATCH (merge patch on ``/status`` of a custom resource with a
  status subresource), LIST of 1000 objects: requests per second with ``--concurrency`` in flight;
- watch fan-out: ``--watchers`` watch streams on one collection, ``--writes`` status writes spaced
  apart; latency from just before the write request is sent to the event's arrival at each watcher.

Run: ``.venv/bin/python -m bench.kubesim.run`` (or ``python bench/kubesim/run.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "bench-token"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "items.bench.example.com"},
    "spec": {"group": "bench.example.com", "scope": "Namespaced",
             "names": {"plural": "items", "singular": "item", "kind": "Item"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"n": {"type": "integer"}}},
                               "status": {"type": "object", "properties": {
                                   "n": {"type": "integer"}, "t": {"type": "number"}}}}}}}]},
}


def start_server() -> tuple[subprocess.Popen, str]:
    kubeconfig = os.path.join(tempfile.mkdtemp(prefix="kubesim-bench-"), "kubeconfig")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "kubesim", "--port", "0", "--kubeconfig", kubeconfig,
                             "--token", TOKEN, "--no-tls", "--no-controllers", "--log-level", "WARNING",
                             "--history-size", "100000"], stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    if not line.startswith("kubesim serving "):
        raise SystemExit(f"kubesim did not start: {line!r}")
    return proc, line.split()[2]


async def rate(name: str, total: int, concurrency: int, one) -> float:
    """Run ``one(i)`` ``total`` times with ``concurrency`` in flight; print and return requests/s."""
    counter = iter(range(total))

    async def worker() -> None:
        for i in counter:
            await one(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    rps = total / elapsed
    print(f"{name:<34} {total:>6} requests in {elapsed:6.2f} s  = {rps:8.0f} req/s", flush=True)
    return rps


async def bench(args: argparse.Namespace, url: str) -> dict:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    conn = aiohttp.TCPConnector(limit=args.concurrency + args.watchers + 8)
    results: dict = {}
    async with aiohttp.ClientSession(url, headers=headers, connector=conn) as s:
        async def check(resp: aiohttp.ClientResponse) -> None:
            if resp.status >= 300:
                raise SystemExit(f"{resp.method} {resp.url}: {resp.status} {await resp.text()}")

        async with s.post("/api/v1/namespaces", json={"metadata": {"name": "bench"}}) as r:
            await check(r)
        async with s.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=CRD) as r:
            await check(r)
        cm_base = "/api/v1/namespaces/bench/configmaps"
        item_base = "/apis/bench.example.com/v1/namespaces/bench/items"

        async def create_cm(i: int) -> None:
            async with s.post(cm_base, json={"metadata": {"name": f"cm-{i:04d}", "labels": {"i": str(i % 10)}},
                                             "data": {"k": "v" * 64}}) as r:
                await check(r)

        async def create_item(i: int) -> None:
            async with s.post(item_base, json={"apiVersion": "bench.example.com/v1", "kind": "Item",
                                               "metadata": {"name": f"it-{i:04d}"}, "spec": {"n": i}}) as r:
                await check(r)

        results["create_configmap_rps"] = await rate("POST (create ConfigMap)", args.objects, args.concurrency,
                                                     create_cm)
        await rate("POST (create custom object)", args.objects, args.concurrency, create_item)

        async def get(i: int) -> None:
            async with s.get(f"{cm_base}/cm-{random.randrange(args.objects):04d}") as r:
                await check(r)
                await r.read()

        results["get_rps"] = await rate("GET one object", args.requests, args.concurrency, get)

        patch_headers = {"Content-Type": "application/merge-patch+json"}

        async def patch_status(i: int) -> None:
            body = json.dumps({"status": {"n": i}})
            async with s.patch(f"{item_base}/it-{random.randrange(args.objects):04d}/status", data=body,
                               headers=patch_headers) as r:
                await check(r)
                await r.read()

        results["status_patch_rps"] = await rate("PATCH /status (merge patch)", args.requests, args.concurrency,
                                                 patch_status)

        async def list_all(i: int) -> None:
            async with s.get(cm_base) as r:
                await check(r)
                body = await r.read()  # the server's work is measured, not the client's JSON decoding
                assert body.count(b'"kind":"ConfigMap"') == args.objects

        results["list_1000_rps"] = await rate(f"LIST of {args.objects} objects", args.lists,
                                              min(args.concurrency, 8), list_all)
        results["watch"] = await fanout(s, item_base, args)
    return results


async def fanout(s: aiohttp.ClientSession, base: str, args: argparse.Namespace) -> dict:
    async with s.get(base, params={"limit": "1"}) as r:
        rv = (await r.json())["metadata"]["resourceVersion"]
    latencies: list[float] = []
    ready = 0
    received = [0] * args.watchers

    async def watcher(idx: int) -> None:
        nonlocal ready
        async with s.get(base, params={"watch": "true", "resourceVersion": rv, "timeoutSeconds": "600"},
                         timeout=aiohttp.ClientTimeout(total=None)) as r:
            ready += 1
            async for line in r.content:
                now = time.time()
                ev = json.loads(line)
                t = ((ev["object"].get("status") or {}).get("t"))
                if t:
                    latencies.append(now - t)
                    received[idx] += 1
                    if received[idx] >= args.writes:
                        return

    tasks = [asyncio.create_task(watcher(i)) for i in range(args.watchers)]
    while ready < args.watchers:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    headers = {"Content-Type": "application/merge-patch+json"}
    for i in range(args.writes):
        body = json.dumps({"status": {"n": i, "t": time.time()}})
        async with s.patch(f"{base}/it-{i % args.objects:04d}/status", data=body, headers=headers) as r:
            await r.read()
        await asyncio.sleep(args.write_interval)
    await asyncio.wait_for(asyncio.gather(*tasks), 120)
    latencies.sort()
    q = statistics.quantiles(latencies, n=100)
    out = {"watchers": args.watchers, "writes": args.writes, "deliveries": len(latencies),
           "p50_ms": round(q[49] * 1000, 2), "p99_ms": round(q[98] * 1000, 2),
           "max_ms": round(latencies[-1] * 1000, 2)}
    print(f"watch fan-out: {args.watchers} watchers x {args.writes} writes = {len(latencies)} deliveries; "
          f"write->delivery p50 {out['p50_ms']} ms, p99 {out['p99_ms']} ms, max {out['max_ms']} ms", flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=1000)
    p.add_argument("--requests", type=int, default=5000)
    p.add_argument("--lists", type=int, default=100)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--watchers", type=int, default=50)
    p.add_argument("--writes", type=int, default=200)
    p.add_argument("--write-interval", type=float, default=0.01)
    p.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = p.parse_args()
    proc, url = start_server()
    try:
        results = asyncio.run(bench(args, url))
    finally:
        proc.terminate()
        proc.wait(15)
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
