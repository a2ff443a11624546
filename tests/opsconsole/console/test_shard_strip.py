"""The controller shards on the overview's engine strip (reconcilers/services/selectors/shards.py): each shard
Lease's id, live or expired, key count, canary selector and whether it is handing over; no strip item while the
controller is not sharded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconcilers.core.meta import rfc3339
from reconcilers.engine import kube
from reconcilers.engine.controller.leader import LEASE
from reconcilers.engine.shards.ownership import KEYS, PENDING, SELECTOR, VIEW
from reconcilers.services.selectors import read_memo
from reconcilers.services.selectors.shards import shard_rows

NOW = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)


def lease(name, *, holder="h", renewed=NOW, duration=15, keys=None, view="v1", selector=None, pending=0):
    notes = {VIEW: view, PENDING: str(pending), **({KEYS: str(keys)} if keys is not None else {}),
             **({SELECTOR: selector} if selector else {})}
    return {"metadata": {"name": name, "annotations": notes},
            "spec": {"holderIdentity": holder, "renewTime": rfc3339(renewed, micro=True),
                     "leaseDurationSeconds": duration}}


def test_rows_say_live_keys_canary_and_who_is_handing_over():
    rows = shard_rows([
        lease("opsconsole-shard-b", keys=40),
        lease("opsconsole-shard-a", keys=35),
        lease("opsconsole-shard-c", keys=25, view="v0", pending=4),  # has not seen the others' view yet
        lease("opsconsole-shard-dead", renewed=NOW - timedelta(seconds=60), keys=30, view="v0"),
        lease("opsconsole-shard-canary", keys=3, selector="opsconsole.io/canary=true"),
        lease("opsconsole-controller"),  # the leader's Lease: not a shard
    ], NOW)
    by = {r["shard"]: r for r in rows}
    assert [r["shard"] for r in rows] == ["a", "b", "c", "canary", "dead"]
    assert by["a"]["alive"] and by["a"]["keys"] == 35 and by["a"]["agreed"]
    assert by["c"]["alive"] and not by["c"]["agreed"] and by["c"]["pending"] == 4 and by["a"]["pending"] == 0
    assert not by["dead"]["alive"] and by["dead"]["agreed"]  # an expired shard hands nothing over
    assert by["canary"]["selector"] == "opsconsole.io/canary=true"


def test_the_overview_strip_shows_each_shard_and_nothing_unsharded(as_role, db, kapi, namespace, settings):
    settings.OPSCONSOLE_LEADER_NAMESPACE = namespace
    read_memo.stats_cache_clear()
    client = as_role("viewer")
    assert 'id="strip-shards"' not in client.get("/").content.decode()
    now = datetime.now(UTC)
    for shard, keys, selector in (("a", 7, None), ("canary", 2, "opsconsole.io/canary=true")):
        body = lease(f"opsconsole-shard-{shard}", keys=keys, renewed=now, selector=selector,
                     pending=3 if shard == "a" else 0)
        body["metadata"]["namespace"] = namespace
        kube.create_object(kapi, LEASE, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", **body})
    read_memo.stats_cache_clear()
    html = client.get("/").content.decode()
    assert 'id="strip-shards"' in html
    assert '<li class="shard" id="shard-a"><code>a</code> <span class="badge badge-ok">live</span> ' \
           '<span class="shard-keys">7</span> keys <span class="shard-pending muted">(3 waiting' in html
    assert "canary opsconsole.io/canary=true" in html and "handing over" not in html
