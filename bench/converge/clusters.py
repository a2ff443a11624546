"""`--clusters C`: opsconsole converging N CRs in each of C clusters at once, next to the single-cluster run.

A scenario `opsconsole-K@C` runs C kubesims, each its own cluster: the first is the `default` cluster (kubeconfig
context `kubesim`), the others `bench-2`, `bench-3`, … (kubesim `--context bench-2`, its own port and kubeconfig
`kubeconfig-bench-2`). The default cluster's controller is `manage.py runcontroller` as in a single-cluster run;
each other cluster gets `runcontroller --cluster bench-i --context bench-i`, which registers it. Every operator
process gets KUBECONFIG = the kubeconfigs joined by ':' (the default cluster's first: its current context is the
processes' own), and the same Celery worker (`-c K`) serves every cluster through `apiclient.get_api_client(cluster)`.

`--clusters C` turns each `opsconsole-K` of `--scenarios` into the pair single-cluster / C clusters, the order
flipped at every other one (`opsconsole-2,opsconsole-2` → `opsconsole-2, opsconsole-2@2, opsconsole-2@2,
opsconsole-2`), so that a background load that drifts weighs on both alike. The C-cluster runs have no steady phase;
what is compared is the burst: each cluster's time to all Running from the first create, and the operator's CPU
(controllers + workers) from just before the burst until no reconcile started for 1.5 s after it, per CR.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconcilers.core.clusters import DEFAULT_CLUSTER
from reconcilers.engine import kube

from . import load
from .procs import Proc, start_kubesim

_OPSCONSOLE = re.compile(r"^opsconsole-(\d+)(?:@(\d+))?$")


def parse_scenario(name: str) -> tuple[str, int, int]:
    """(operator, workers, clusters) of a scenario name: `opsconsole-K`, `opsconsole-K@C` or `kopf` (1 worker
    process, 1 cluster); ValueError for any other name."""
    if name == "kopf":
        return "kopf", 1, 1
    m = _OPSCONSOLE.match(name)
    if not m or int(m.group(1)) < 1 or (m.group(2) is not None and int(m.group(2)) < 1):
        raise ValueError(f"unknown scenario {name!r} (opsconsole-<workers>[@<clusters>] or kopf)")
    return "opsconsole", int(m.group(1)), int(m.group(2) or 1)


def expand_scenarios(scenarios: tuple[str, ...], clusters: int) -> tuple[str, ...]:
    """The scenarios `--clusters` runs: each `opsconsole-K` with its `opsconsole-K@C` next to it (single-cluster
    first at the first, third, … such entry, last at the others); kopf and `opsconsole-K@C` as given (kopf watches
    one cluster). Unchanged for one cluster; ValueError for an unknown name."""
    if clusters < 1:
        raise ValueError("--clusters: at least 1")
    for name in scenarios:
        parse_scenario(name)
    if clusters == 1:
        return scenarios
    out: list[str] = []
    paired = 0
    for name in scenarios:
        operator, _workers, c = parse_scenario(name)
        if operator != "opsconsole" or c != 1:
            out.append(name)
            continue
        pair = [name, f"{name}@{clusters}"]
        out += pair if paired % 2 == 0 else pair[::-1]
        paired += 1
    return tuple(out)


def cluster_name(index: int) -> str:
    """The i-th cluster of a scenario (0: the default cluster)."""
    return DEFAULT_CLUSTER if index == 0 else f"bench-{index + 1}"


@dataclass
class SimCluster:
    """One kubesim of a scenario: the cluster's name, its kubeconfig context, the process, its URL and
    kubeconfig, the bench's own client and the watch that notes its CRs' Running."""

    name: str
    context: str
    proc: Proc
    url: str
    kubeconfig: Path
    api: Any = None
    tracker: load.Tracker | None = None


def start_clusters(run_dir: Path, env: dict[str, str], count: int, token: str, *, schedule_delay: float,
                   start_delay: float, ready_delay: float) -> list[SimCluster]:
    """`count` kubesims (the default cluster's first), started at once, each serving; those that started are
    stopped again when one fails to."""

    def one(i: int) -> SimCluster:
        name = cluster_name(i)
        context = "kubesim" if i == 0 else name
        proc, url, kubeconfig = start_kubesim(run_dir, env, schedule_delay=schedule_delay, start_delay=start_delay,
                                              ready_delay=ready_delay, token=token, context=context)
        return SimCluster(name, context, proc, url, kubeconfig)

    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="kubesim") as pool:
        futures = [pool.submit(one, i) for i in range(count)]
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:
        for f in futures:
            if f.exception() is None:
                f.result().proc.stop()
        raise failed[0]  # type: ignore[misc]
    return [f.result() for f in futures]


def connect(sims: list[SimCluster], namespaces: list[str]) -> None:
    """Install the CRD and the namespaces in every cluster and start each one's Running watch."""
    for sim in sims:
        sim.api = kube.build_api_client(sim.kubeconfig)
        load.install(sim.api, namespaces)
        sim.tracker = load.Tracker(sim.api, sim.name)
        sim.tracker.start()
    for sim in sims:
        assert sim.tracker is not None
        sim.tracker.synced.wait(10)


def kubeconfig_list(sims: list[SimCluster]) -> str:
    """KUBECONFIG for the operator: every cluster's kubeconfig, the default cluster's first."""
    return os.pathsep.join(str(sim.kubeconfig) for sim in sims)


def running_at(sims: list[SimCluster]) -> dict[str, float]:
    """Every cluster's key → when first seen Running (the keys of different clusters differ by their prefix)."""
    out: dict[str, float] = {}
    for sim in sims:
        assert sim.tracker is not None
        with sim.tracker.cond:
            out.update(sim.tracker.running_at)
    return out
