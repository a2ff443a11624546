"""The latency and watch-cut faults: latency added to a share of requests (`latency_rate`), and every watch's
connection dropped mid-stream `watch_cut_interval` seconds after it opened, including watches already open
when the fault is switched on; a client resuming from its last resourceVersion misses nothing."""

from __future__ import annotations

import json
import threading
import time

import pytest
from kubernetes import client
from urllib3.exceptions import ProtocolError

from kubesim.testing import running_kubesim, wait_for

LATENCY = 0.15


def test_latency_is_added_to_the_given_share_of_requests_only():
    with running_kubesim(controllers=False, latency=LATENCY, latency_rate=0.5) as k:
        core = client.CoreV1Api(k.api_client())
        slow = 0
        for _ in range(40):
            t0 = time.monotonic()
            core.list_namespaced_config_map("default")
            slow += time.monotonic() - t0 >= LATENCY
        delayed = k.stats()["delayedRequests"]
        assert 5 <= delayed <= 35  # a share, not all and not none (binomial(40, 0.5): outside is ~1e-5)
        assert slow >= delayed  # every delayed request really waited
        assert k.faults()["latency_rate"] == 0.5
        k.set_faults(latency_rate=0.0)
        core.list_namespaced_config_map("default")
        assert k.stats()["delayedRequests"] == delayed
        k.clear_faults()
        assert k.faults()["latency_rate"] == 1.0 and k.faults()["latency"] == 0.0


def test_open_and_new_watches_are_dropped_mid_stream_repeatedly_and_a_resuming_client_misses_nothing():
    with running_kubesim(controllers=False) as k:
        core = client.CoreV1Api(k.api_client())
        first = core.create_namespaced_config_map("default", {"metadata": {"name": "c0"}})
        # a watch opened before the fault: cut once the fault is on (it has been open longer than the interval)
        early = core.list_namespaced_config_map("default", watch=True, resource_version=first.metadata.resource_version,
                                                timeout_seconds=30, _preload_content=False)
        time.sleep(0.3)
        k.set_faults(watch_cut_interval=0.2)
        t0 = time.monotonic()
        with pytest.raises(ProtocolError):  # the chunked body never ends: a broken stream, not an end
            for _ in early.stream(amt=None):
                pass
        assert time.monotonic() - t0 < 3

        names: list[str] = []
        cuts = 0
        stop = threading.Event()

        def create() -> None:
            i = 1
            while not stop.is_set() and i <= 12:
                core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
                i += 1
                time.sleep(0.07)

        writer = threading.Thread(target=create)
        writer.start()
        rv = first.metadata.resource_version
        deadline = time.monotonic() + 30
        try:
            while len(names) < 12 and time.monotonic() < deadline:
                resp = core.list_namespaced_config_map("default", watch=True, resource_version=rv, timeout_seconds=30,
                                                       _preload_content=False)
                buffer = b""
                try:
                    for chunk in resp.stream(amt=None):
                        buffer += chunk
                        while b"\n" in buffer:
                            raw, buffer = buffer.split(b"\n", 1)
                            event = json.loads(raw)
                            rv = event["object"]["metadata"]["resourceVersion"]
                            names.append(event["object"]["metadata"]["name"])
                except ProtocolError:
                    cuts += 1
        finally:
            stop.set()
            writer.join()
        assert names == [f"c{i}" for i in range(1, 13)]  # each once, in order, across the cuts
        assert cuts >= 2
        stats = wait_for(lambda: (s := k.stats())["watches"] == 0 and s, timeout=5)
        assert stats["watchesCut"] >= cuts + 1
