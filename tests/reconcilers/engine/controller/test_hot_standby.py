"""The hot standby on a real kubesim: its informers list while it campaigns, it enqueues nothing until it leads, and
at the takeover it enqueues only what changed (an object changed while nobody led, an object whose version the
record does not have), the rest within one resync period, spread; a new object at once."""

from __future__ import annotations

import time
import uuid

import pytest

from reconcilers.engine import kube
from reconcilers.engine.controller import LeaderElector
from reconcilers.engine.controller.wiring import build_controller
from tests.reconcilers.engine.controller.kinds import WIDGET, WidgetReconciler, widget

FAST = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.1}
RESYNC = 2.0  # seconds: the period the takeover's unchanged keys are spread over
OBJECTS = 30


def _controller(api, lease, identity, recorded, versions=None):
    elector = LeaderElector(api, identity=identity, name=lease, **FAST)
    return build_controller(api, [WidgetReconciler()], elector=elector, mirror=False, pump=lambda: 0,
                            enqueue=lambda key: recorded.append((time.monotonic(), key)) or True,
                            standby="hot", mirror_versions=versions, resync_seconds=RESYNC)


def _step_until(condition, *controllers, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        for controller in controllers:
            controller.step()
        time.sleep(0.02)


def test_the_hot_standby_takes_over_with_warm_caches_and_enqueues_only_what_changed(api, widget_kind, ns):
    lease = f"test-lease-{uuid.uuid4().hex[:8]}"
    for i in range(OBJECTS):
        kube.create_object(api, WIDGET, widget(f"w{i:02d}", ns, size=1))
    led, stood = [], []
    one = _controller(api, lease, "one", led)
    recorded_versions: dict[str, str] = {}
    two = _controller(api, lease, "two", stood, versions=lambda reconciler: dict(recorded_versions))
    try:
        _step_until(lambda: one.running and two.standing_by, one, two)
        assert one.wait_synced(10) and two.informer_set.wait_synced(10)
        _step_until(lambda: len({k for _, k in led if f"/{ns}/" in k}) >= OBJECTS, one, two)
        time.sleep(0.3)
        two.step()
        assert not two.running and stood == []  # the standby lists and watches but enqueues nothing
        assert len([k for k in two.cached_keys() if f"/{ns}/" in k]) == OBJECTS

        # what the record holds: every object's version as the leader last saw it, except w01 (its last change
        # reached the cluster but not the record before the leader died)
        for key in one.cached_keys():
            obj = one.informers[("widgets.test.opsconsole.io", "widgets")].get(key)
            recorded_versions[obj["metadata"]["uid"]] = obj["metadata"]["resourceVersion"]
        w01 = kube.get_object(api, WIDGET, ns, "w01")
        recorded_versions[w01["metadata"]["uid"]] = "stale"

        # the leader dies (no release, no more steps); w02 changes while nobody leads
        one.informer_set.stop()
        time.sleep(0.2)
        kube.patch_object(api, WIDGET, ns, "w02", {"spec": {"size": 2}})
        time.sleep(0.3)
        _step_until(lambda: two.running, two, timeout=FAST["lease_duration"] + 3)
        took_over = time.monotonic()  # the step that took over enqueued what it handed off (not yet a resync slot)
        at_takeover = {k for _, k in stood if f"/{ns}/" in k}
        assert {k.rsplit("/", 1)[1] for k in at_takeover} == {"w01", "w02"}, at_takeover
        assert two.parts.standby.replayed >= 1 and two.parts.standby.changed >= 1

        kube.create_object(api, WIDGET, widget("fresh", ns, size=1))
        _step_until(lambda: any(k.endswith(f"/{ns}/fresh") for _, k in stood), two, timeout=5)
        fresh_at = next(t for t, k in stood if k.endswith(f"/{ns}/fresh"))
        assert fresh_at - took_over < RESYNC / 2  # not behind the old keys' resync

        # the level-triggered guarantee: every other object is enqueued within one resync period, spread
        _step_until(lambda: len({k for _, k in stood if f"/{ns}/" in k}) >= OBJECTS + 1, two, timeout=RESYNC + 3)
        times = sorted(t for t, k in stood if f"/{ns}/" in k and k.rsplit("/", 1)[1] not in ("w01", "w02", "fresh"))
        assert times[-1] - took_over <= RESYNC + 0.5
        assert times[-1] - times[0] >= RESYNC / 3  # spread, not all at once
    finally:
        one.shutdown()
        two.shutdown()
    assert not two.standing_by and not two.running


@pytest.mark.parametrize("standby", ["warm", ""])
def test_an_unknown_standby_mode_is_refused_naming_it(api, standby):
    with pytest.raises(ValueError, match="standby"):
        build_controller(api, [WidgetReconciler()], enqueue=lambda key: True, pump=lambda: 0, mirror=False,
                         standby=standby)
