"""The simulated kubelet's image pull retries (ErrImagePull/ImagePullBackOff with a doubling backoff) and Event
aggregation (one Event whose count grows, as client-go's EventCorrelator does), through the official client."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client, watch

from kubesim.cli import build_parser, options_from_args
from kubesim.testing import KubesimHandle, running_kubesim, wait_for

BACKOFF, BACKOFF_MAX = 0.3, 1.2
IMAGE = "nginx:broken"


@pytest.fixture(scope="module")
def fast_pulls() -> Iterator[KubesimHandle]:
    """A kubesim whose kubelet retries image pulls after 0.3 s, 0.6 s, then every 1.2 s."""
    with running_kubesim(schedule_delay=0.01, start_delay=0.05, ready_delay=0.05, image_pull_backoff=BACKOFF,
                         image_pull_backoff_max=BACKOFF_MAX) as k:
        yield k


@pytest.fixture(scope="module")
def pcore(fast_pulls: KubesimHandle) -> client.CoreV1Api:
    return client.CoreV1Api(fast_pulls.api_client())


@pytest.fixture()
def pns(pcore: client.CoreV1Api) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    pcore.create_namespace({"metadata": {"name": name}})
    return name


def _waiting(pod: client.V1Pod) -> str | None:
    statuses = pod.status.container_statuses or []
    return statuses[0].state.waiting.reason if statuses and statuses[0].state.waiting else None


def _events(core: client.CoreV1Api, ns: str, pod: str) -> list[client.CoreV1Event]:
    return core.list_namespaced_event(ns, field_selector=f"involvedObject.name={pod}").items


def _one(events: list[client.CoreV1Event], reason: str, message: str) -> client.CoreV1Event | None:
    found = [e for e in events if e.reason == reason and e.message == message]
    assert len(found) <= 1, found
    return found[0] if found else None


def _pull_attempts(core: client.CoreV1Api, ns: str, name: str, attempts: int) -> list[tuple[float, str]]:
    """(monotonic time, waiting reason) of each change of the Pod's waiting reason until ``attempts`` pulls."""
    seen: list[tuple[float, str]] = []
    w = watch.Watch()
    for ev in w.stream(core.list_namespaced_pod, ns, field_selector=f"metadata.name={name}", timeout_seconds=10):
        reason = _waiting(ev["object"])
        if reason and (not seen or seen[-1][1] != reason):
            seen.append((time.monotonic(), reason))
        if sum(r == "ErrImagePull" for _, r in seen) >= attempts:
            w.stop()
    return seen


def test_the_cli_flags_set_the_backoff():
    opts = options_from_args(build_parser().parse_args(["--image-pull-backoff", "0.3",
                                                        "--image-pull-backoff-max", "2"]))
    assert (opts.kubelet.image_pull_backoff, opts.kubelet.image_pull_backoff_max) == (0.3, 2.0)
    defaults = options_from_args(build_parser().parse_args([]))
    assert (defaults.kubelet.image_pull_backoff, defaults.kubelet.image_pull_backoff_max) == (10.0, 300.0)


def test_a_broken_image_is_pulled_again_with_a_growing_backoff_and_its_events_aggregate(pcore, pns):
    start_rv = pcore.list_namespaced_event(pns).metadata.resource_version
    pcore.create_namespaced_pod(pns, {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": IMAGE}]}})
    seen = _pull_attempts(pcore, pns, "p", attempts=4)
    reasons = [r for _, r in seen]
    assert reasons == ["ErrImagePull", "ImagePullBackOff"] * 3 + ["ErrImagePull"], reasons
    pulls = [t for t, r in seen if r == "ErrImagePull"]
    gaps = [b - a for a, b in zip(pulls, pulls[1:], strict=False)]
    assert gaps[0] >= BACKOFF and gaps[1] > gaps[0] * 1.4 and gaps[2] > gaps[1] * 1.4, gaps
    assert gaps[2] < BACKOFF_MAX + 1.0, gaps
    pod = pcore.read_namespaced_pod("p", pns)
    assert pod.status.phase == "Pending" and pod.status.container_statuses[0].restart_count == 0

    events = _events(pcore, pns, "p")
    backoff = _one(events, "Failed", "Error: ImagePullBackOff")
    assert backoff is not None and backoff.count >= 3 and backoff.type == "Warning"
    assert backoff.source.component == "kubelet"
    assert backoff.last_timestamp > backoff.first_timestamp
    assert re.fullmatch(r"p\.[0-9a-f]{16}", backoff.metadata.name)
    pulled = _one(events, "Failed", f'Failed to pull image "{IMAGE}": not found')
    assert pulled is not None and pulled.count >= 4
    assert _one(events, "Failed", "Error: ErrImagePull").count >= 4
    normal = _one(events, "BackOff", f'Back-off pulling image "{IMAGE}"')
    assert normal is not None and normal.type == "Normal" and normal.count >= 3
    assert len([e for e in events if e.reason == "Failed"]) == 3

    changes = []
    w = watch.Watch()
    for ev in w.stream(pcore.list_namespaced_event, pns, resource_version=start_rv, timeout_seconds=1):
        obj = ev["object"]
        if obj.metadata.name == backoff.metadata.name:
            changes.append((ev["type"], obj.count, int(obj.metadata.resource_version)))
    assert [t for t, _, _ in changes[:3]] == ["ADDED", "MODIFIED", "MODIFIED"], changes
    assert [c for _, c, _ in changes] == list(range(1, len(changes) + 1))
    assert [rv for _, _, rv in changes] == sorted({rv for _, _, rv in changes})


def test_a_deleted_aggregated_event_is_posted_anew_with_count_one(pcore, pns):
    pcore.create_namespaced_pod(pns, {"metadata": {"name": "q"}, "spec": {"containers": [
        {"name": "c", "image": IMAGE}]}})
    message = "Error: ImagePullBackOff"
    first = wait_for(lambda: (lambda e: e if e and e.count >= 2 else None)(
        _one(_events(pcore, pns, "q"), "Failed", message)), timeout=5)
    pcore.delete_namespaced_event(first.metadata.name, pns)
    again = wait_for(lambda: _one(_events(pcore, pns, "q"), "Failed", message), timeout=5, interval=0.02)
    assert again.metadata.name != first.metadata.name
    assert again.count == 1
    grown = wait_for(lambda: (lambda e: e if e and e.count >= 2 else None)(
        _one(_events(pcore, pns, "q"), "Failed", message)), timeout=5)
    assert grown.metadata.name == again.metadata.name


def test_fixing_the_image_stops_the_cycle(pcore, pns):
    pcore.create_namespaced_pod(pns, {"metadata": {"name": "r"}, "spec": {"containers": [
        {"name": "c", "image": IMAGE}]}})
    wait_for(lambda: _waiting(pcore.read_namespaced_pod("r", pns)) == "ImagePullBackOff", timeout=5)
    pcore.patch_namespaced_pod("r", pns, {"spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}})

    def ready() -> bool:
        pod = pcore.read_namespaced_pod("r", pns)
        st = (pod.status.container_statuses or [None])[0]
        return bool(st and st.image == "nginx:1.27" and st.ready and pod.status.phase == "Running")

    wait_for(ready, timeout=5)
    counts = {(e.reason, e.message): e.count for e in _events(pcore, pns, "r")}
    time.sleep(BACKOFF_MAX + 0.3)
    assert ready()
    after = {(e.reason, e.message): e.count for e in _events(pcore, pns, "r")}
    assert {k: v for k, v in after.items() if k[0] in ("Failed", "BackOff", "Pulling")} == {
        k: v for k, v in counts.items() if k[0] in ("Failed", "BackOff", "Pulling")}
    assert ("Started", "Started container c") in after


def test_crash_loop_backoff_events_aggregate(core, ns):
    core.create_namespaced_pod(ns, {"metadata": {"name": "crash"}, "spec": {"containers": [
        {"name": "c", "image": "app:crashloop"}]}})
    wait_for(lambda: (core.read_namespaced_pod("crash", ns).status.container_statuses or [None])[0] is not None
             and core.read_namespaced_pod("crash", ns).status.container_statuses[0].restart_count >= 3, timeout=5)
    backoffs = [e for e in _events(core, ns, "crash") if e.reason == "BackOff"]
    assert len(backoffs) == 1, backoffs
    assert backoffs[0].message == "Back-off restarting failed container" and backoffs[0].type == "Warning"
    assert backoffs[0].count >= 3
