"""`python -m bench.memory` end to end at N=10: the fleet converges in its own kubesim, both modes are measured in
processes of their own, and the report carries every figure, the slim caches smaller than the full ones for every
kind; the object cache's payload and its size in Redis (scratch hashes in the suite's Redis) smaller in slim for
the children, the reconciled objects' entries the same. Real processes: kubesim and the two measurements."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.conf import settings

from tests.bench.test_converge_smoke import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.long_unit]


def test_the_memory_benchmark_measures_both_modes_at_n_10():
    proc = subprocess.run([sys.executable, "-m", "bench.memory", "--n", "10", "--threads", "4",
                           "--redis", settings.REDIS_URL], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-6000:]
    lines = proc.stdout.strip().splitlines()
    full, slim = json.loads(lines[-1])
    assert (full["mode"], slim["mode"]) == ("full", "slim")
    assert "| per Memcached, KiB (N = 10) | full | slim |" in lines
    for result in (full, slim):
        objects = result["objects"]
        assert objects["memcacheds"] == objects["deployments"] == objects["services"] == 10
        assert objects["events"] >= 40  # each Memcached's phase changes, its Deployment's, ReplicaSet's and Pod's
        assert result["rss_before_kib"] > 0 and result["rss_peak_kib"] >= result["rss_after_kib"]
    for kind, size in slim["cache_bytes"].items():
        assert 0 < size < full["cache_bytes"][kind] / 3, kind
    assert slim["object_cache_payload"]["memcacheds"] == full["object_cache_payload"]["memcacheds"]  # whole
    for child in ("deployments", "services"):
        assert 0 < slim["object_cache_payload"][child] < full["object_cache_payload"][child], child
        assert 0 < slim["redis_bytes"][child] < full["redis_bytes"][child], child
    assert any(line.startswith("| **object cache in Redis, total** |") for line in lines)
