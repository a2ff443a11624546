"""The controller's composition root (controller.wiring): what `build_controller` builds by default, what a test's
doubles replace, and the Lease's elector from settings."""

from __future__ import annotations

import os

from django.test import override_settings

from reconcilers.engine.controller import adapters
from reconcilers.engine.controller.wiring import build_controller, default_resync_seconds, leader_elector
from tests.reconcilers.engine.controller.kinds import DEPLOYMENT, WIDGET, WidgetReconciler


@override_settings(OPSCONSOLE_EVENT_ARCHIVE=True, OPSCONSOLE_RESYNC_SECONDS=42, OPSCONSOLE_HEALING_INTERVAL=7)
def test_the_defaults_are_the_backends_and_the_settings() -> None:
    controller = build_controller(None, [WidgetReconciler()])
    parts = controller.parts
    assert parts.mirror.write is adapters.mirror_write and parts.sweeps.mirror_sweep is adapters.mirror_sweep
    assert parts.feed.cache_and_enqueue is adapters.cache_and_enqueue and parts.feed.pump is adapters.pump
    assert parts.gauges.depth_record is adapters.depth_record
    assert parts.archive is not None and getattr(parts.archive.write, "resolver", None) is not None
    assert parts.informers.events and controller.resync_seconds == 42
    assert controller.heal_interval == 7 and parts.healing.heal is not None  # the evaluator's step
    assert set(parts.kinds.kinds) == {(WIDGET.group, WIDGET.plural), (DEPLOYMENT.group, DEPLOYMENT.plural)}


def test_the_periodic_resync_is_ten_hours_by_default(settings) -> None:
    del settings.OPSCONSOLE_RESYNC_SECONDS
    assert default_resync_seconds() == 36000.0  # controller-runtime's SyncPeriod
    controller = build_controller(None, [WidgetReconciler()], enqueue=lambda key: True, mirror=False)
    assert controller.resync_schedule.periods == {(WIDGET.group, WIDGET.plural): 36000.0}
    if "OPSCONSOLE_RESYNC_SECONDS" not in os.environ:
        from opsconsole import settings as project_settings

        assert project_settings.OPSCONSOLE_RESYNC_SECONDS == 36000


def test_without_the_mirror_there_is_no_archive_no_healing_and_no_sweep() -> None:
    controller = build_controller(None, [WidgetReconciler()], enqueue=lambda key: True, mirror=False)
    assert controller.parts.archive is None and controller.heal_interval == 0
    assert controller.parts.sweeps.mirror_sweep is None and not controller.parts.object_cache  # a faked enqueue
    assert controller.parts.feed.enqueue_many(["a", "b"]) == ["a", "b"]


@override_settings(OPSCONSOLE_LEADER_NAMESPACE="ops", OPSCONSOLE_LEADER_LEASE_SECONDS=30)
def test_the_leader_elector_from_settings_and_options() -> None:
    elector = leader_elector(None, "me", retry_period=1.0)
    assert (elector.identity, elector.namespace) == ("me", "ops")
    assert (elector.lease_duration, elector.renew_deadline, elector.retry_period) == (30.0, 6.0, 1.0)
