"""List and watch: selectors, pagination, resourceVersion replay, 410 Gone, bookmarks, timeouts."""

from __future__ import annotations

import json
import threading
import time

import pytest
from kubernetes import client, watch

from kubesim.testing import running_kubesim


def _cms(core, ns, n, labels=None):
    return [core.create_namespaced_config_map(ns, {"metadata": {"name": f"cm-{i:02d}", "labels": (labels or {})(i)
                                                                if labels else {}}})
            for i in range(n)]


def test_label_selector_operators(core, ns):
    _cms(core, ns, 6, lambda i: {"tier": ["web", "db", "cache"][i % 3], **({"canary": "y"} if i < 2 else {})})

    def names(sel):
        return sorted(c.metadata.name for c in core.list_namespaced_config_map(ns, label_selector=sel).items)

    assert names("tier=web") == ["cm-00", "cm-03"]
    assert names("tier==db") == ["cm-01", "cm-04"]
    assert names("tier!=web") == ["cm-01", "cm-02", "cm-04", "cm-05"]
    assert names("tier in (web,cache)") == ["cm-00", "cm-02", "cm-03", "cm-05"]
    assert names("tier notin (web,cache)") == ["cm-01", "cm-04"]
    assert names("canary") == ["cm-00", "cm-01"]
    assert names("!canary,tier=web") == ["cm-03"]
    with pytest.raises(client.ApiException) as e:
        core.list_namespaced_config_map(ns, label_selector="tier in web")
    assert e.value.status == 400


def test_a_label_selected_list_pages_in_name_order_and_sees_relabels(core, ns):
    _cms(core, ns, 7, lambda i: {"tier": "web" if i % 2 == 0 else "db"})  # web: cm-00, -02, -04, -06
    first = core.list_namespaced_config_map(ns, label_selector="tier=web", limit=2)
    assert [c.metadata.name for c in first.items] == ["cm-00", "cm-02"]
    rest = core.list_namespaced_config_map(ns, label_selector="tier=web", limit=2, _continue=first.metadata._continue)
    assert [c.metadata.name for c in rest.items] == ["cm-04", "cm-06"]
    core.patch_namespaced_config_map("cm-01", ns, {"metadata": {"labels": {"tier": "web"}}})
    core.patch_namespaced_config_map("cm-02", ns, {"metadata": {"labels": {"tier": None}}})
    got = core.list_namespaced_config_map(ns, label_selector="tier=web,tier!=db").items
    assert [c.metadata.name for c in got] == ["cm-00", "cm-01", "cm-04", "cm-06"]
    everywhere = core.list_config_map_for_all_namespaces(label_selector="tier=db").items
    assert [c.metadata.name for c in everywhere if c.metadata.namespace == ns] == ["cm-03", "cm-05"]


def test_a_selected_page_gives_no_count_and_a_token_only_when_another_match_follows(core, ns):
    _cms(core, ns, 7, lambda i: {"tier": "web" if i % 2 == 0 else "db"})  # web: cm-00, -02, -04, -06
    first = core.list_namespaced_config_map(ns, label_selector="tier=web", limit=3)
    assert first.metadata._continue and first.metadata.remaining_item_count is None  # as the API server: no count
    whole = core.list_namespaced_config_map(ns, label_selector="tier=web", limit=4)
    assert len(whole.items) == 4 and not whole.metadata._continue  # later non-matching objects make no token
    by_field = core.list_namespaced_config_map(ns, field_selector="metadata.name!=cm-06", limit=6)
    assert len(by_field.items) == 6 and not by_field.metadata._continue


def test_field_selectors(core, ns):
    _cms(core, ns, 3)
    got = core.list_config_map_for_all_namespaces(field_selector=f"metadata.namespace={ns},metadata.name=cm-01")
    assert [c.metadata.name for c in got.items] == ["cm-01"]
    assert len(core.list_namespaced_config_map(ns, field_selector="metadata.name!=cm-01").items) == 2
    with pytest.raises(client.ApiException) as e:
        core.list_namespaced_config_map(ns, field_selector="data.k=v")
    assert e.value.status == 400 and "field label not supported" in json.loads(e.value.body)["message"]


def test_pods_field_selector_on_phase(core, ns):
    core.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "x:1"}]}})
    pending_or_running = core.list_namespaced_pod(ns, field_selector="status.phase!=Failed").items
    assert [p.metadata.name for p in pending_or_running] == ["p"]
    assert core.list_namespaced_pod(ns, field_selector="status.phase=Failed").items == []


def test_limit_and_continue_pages_through_everything(core, ns):
    _cms(core, ns, 7)
    first = core.list_namespaced_config_map(ns, limit=3)
    assert [c.metadata.name for c in first.items] == ["cm-00", "cm-01", "cm-02"]
    assert first.metadata._continue and first.metadata.remaining_item_count == 4
    seen = [c.metadata.name for c in first.items]
    token = first.metadata._continue
    while token:
        page = core.list_namespaced_config_map(ns, limit=3, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        seen += [c.metadata.name for c in page.items]
        token = page.metadata._continue
    assert seen == [f"cm-{i:02d}" for i in range(7)]


def test_list_resource_version_is_the_current_counter(core, ns):
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "x"}})
    lst = core.list_namespaced_config_map(ns)
    assert int(lst.metadata.resource_version) >= int(cm.metadata.resource_version)


def test_watch_replays_from_a_resource_version_and_deleted_carries_last_state(core, ns):
    start = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "w"}, "data": {"v": "1"}})
    core.patch_namespaced_config_map("w", ns, {"data": {"v": "2"}})
    core.delete_namespaced_config_map("w", ns)
    events = []
    for ev in watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=start, timeout_seconds=1):
        events.append((ev["type"], ev["object"].data, int(ev["object"].metadata.resource_version)))
    assert [e[0] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[2][1] == {"v": "2"}
    assert events[0][2] < events[1][2] < events[2][2]


def test_events_waiting_for_a_watcher_go_out_in_one_chunk_and_parse_line_by_line(core, ns):
    """A replay of 30 events is written as one chunk (one send, not one per event); the official client's watch
    still reads every event, in order, from it."""
    start = core.list_namespaced_config_map(ns).metadata.resource_version
    _cms(core, ns, 30)
    raw = core.list_namespaced_config_map(ns, watch=True, resource_version=start, timeout_seconds=1,
                                          _preload_content=False)
    chunks = [c for c in raw.read_chunked() if c]
    lines = b"".join(chunks).splitlines()
    assert [json.loads(line)["object"]["metadata"]["name"] for line in lines] == [f"cm-{i:02d}" for i in range(30)]
    assert len(chunks) == 1
    names = [e["object"].metadata.name for e in
             watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=start, timeout_seconds=1)]
    assert names == [f"cm-{i:02d}" for i in range(30)]


def test_watch_without_resource_version_starts_with_synthetic_added(core, ns):
    _cms(core, ns, 2)
    types = [(e["type"], e["object"].metadata.name) for e in
             watch.Watch().stream(core.list_namespaced_config_map, ns, timeout_seconds=1)]
    assert types == [("ADDED", "cm-00"), ("ADDED", "cm-01")]


def test_watch_streams_live_events_and_label_selector_transitions(core, ns):
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    seen = []

    def consume():
        for ev in watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=rv,
                                       label_selector="app=x", timeout_seconds=2):
            seen.append((ev["type"], ev["object"].metadata.name))

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(0.3)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "in", "labels": {"app": "x"}}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "out", "labels": {"app": "y"}}})
    core.patch_namespaced_config_map("in", ns, {"metadata": {"labels": {"app": "z"}}})
    core.patch_namespaced_config_map("out", ns, {"metadata": {"labels": {"app": "x"}}})
    t.join(5)
    assert seen == [("ADDED", "in"), ("DELETED", "in"), ("ADDED", "out")]


def test_watch_from_a_compacted_resource_version_gets_410_gone():
    with running_kubesim(history_size=5, controllers=False) as k:
        core = client.CoreV1Api(k.api_client())
        old = core.create_namespaced_config_map("default", {"metadata": {"name": "a"}}).metadata.resource_version
        for i in range(10):
            core.patch_namespaced_config_map("a", "default", {"data": {"i": str(i)}})
        # the python client turns the ERROR event into ApiException(410) when retries are off
        with pytest.raises(client.ApiException) as e:
            list(watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=old,
                                      timeout_seconds=1))
        assert e.value.status == 410
        # the raw stream: HTTP 200, one ERROR event carrying a Status
        resp = core.list_namespaced_config_map("default", watch=True, resource_version=old, _preload_content=False)
        lines = [json.loads(line) for line in resp.data.decode().splitlines() if line]
        assert len(lines) == 1 and lines[0]["type"] == "ERROR"
        status = lines[0]["object"]
        assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"
        # a list with a continue token that old is 410 too
        with pytest.raises(client.ApiException) as e:
            import base64
            token = base64.urlsafe_b64encode(json.dumps({"rv": int(old), "ns": "", "name": ""}).encode()).decode()
            core.list_namespaced_config_map("default", _continue=token)
        assert e.value.status == 410


def test_bookmarks_carry_the_current_resource_version(core, ns):
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    resp = core.list_namespaced_config_map(ns, watch=True, resource_version=rv, allow_watch_bookmarks=True,
                                           timeout_seconds=1, _preload_content=False)
    events = [json.loads(line) for line in resp.data.decode().splitlines() if line]
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, events
    assert bookmarks[0]["object"]["kind"] == "ConfigMap"
    assert int(bookmarks[0]["object"]["metadata"]["resourceVersion"]) >= int(rv)


def test_no_bookmarks_unless_asked(core, ns):
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    resp = core.list_namespaced_config_map(ns, watch=True, resource_version=rv, timeout_seconds=1,
                                           _preload_content=False)
    assert resp.data.strip() == b""


def test_timeout_seconds_ends_the_stream(core, ns):
    t0 = time.monotonic()
    list(watch.Watch().stream(core.list_namespaced_config_map, ns, timeout_seconds=1))
    assert 0.9 <= time.monotonic() - t0 < 3


def test_cluster_wide_watch_sees_every_namespace(core, ns):
    rv = core.list_config_map_for_all_namespaces().metadata.resource_version
    core.create_namespace({"metadata": {"name": ns + "-b"}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "one"}})
    core.create_namespaced_config_map(ns + "-b", {"metadata": {"name": "two"}})
    got = {(e["object"].metadata.namespace, e["object"].metadata.name) for e in
           watch.Watch().stream(core.list_config_map_for_all_namespaces, resource_version=rv, timeout_seconds=1)}
    assert {(ns, "one"), (ns + "-b", "two")} <= got


def test_many_concurrent_watchers_all_get_the_event(core, ns):
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    results = []

    def consume():
        resp = core.list_namespaced_config_map(ns, watch=True, resource_version=rv, timeout_seconds=2,
                                               _preload_content=False)
        results.append([json.loads(line)["type"] for line in resp.data.decode().splitlines() if line])

    threads = [threading.Thread(target=consume) for _ in range(20)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "fan"}})
    for t in threads:
        t.join(5)
    assert len(results) == 20 and all(r == ["ADDED"] for r in results)
