"""Issue 20: the leading controller writes a signed audit checkpoint every OPSCONSOLE_AUDIT_CHECKPOINT_SECONDS
(a file and the ConfigMap in the leader namespace, on a real kubesim); a standby writes none."""

from __future__ import annotations

import pytest

from reconcilers.engine import checkpoint
from reconcilers.engine.controller.wiring import build_controller
from tests.reconcilers.engine.controller.kinds import WidgetReconciler

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def keys(settings, tmp_path):
    settings.OPSCONSOLE_AUDIT_KEY_FILE = str(tmp_path / "audit-signing.key")
    settings.OPSCONSOLE_AUDIT_CHECKPOINT_DIR = str(tmp_path / "checkpoints")
    settings.OPSCONSOLE_LEADER_NAMESPACE = "default"


class Standby:
    is_leader = False

    def due(self):
        return False

    def release(self):
        pass


def test_the_leading_controller_writes_a_checkpoint_every_interval(api, widget_kind):
    now = [1000.0]
    controller = build_controller(api, [WidgetReconciler()], enqueue=lambda key: True, pump=lambda: 0, mirror=False,
                                  clock=lambda: now[0], checkpoint_seconds=300)
    try:
        controller.step()
        assert controller.wait_synced(10)
        now[0] += 299
        controller.step()
        assert controller.checkpoints == 0
        now[0] += 2
        assert controller.step() is True and controller.checkpoints == 1
        (path,) = sorted(checkpoint.checkpoint_dir().glob("checkpoint-*.json"))
        published = checkpoint.configmap_read(api)
        assert published["seq"] == 1 and checkpoint.signature_ok(published, checkpoint.signing_key())
        assert checkpoint.checkpoint_verify().problems == []
    finally:
        controller.shutdown()


def test_a_standby_writes_none(api, widget_kind):
    now = [1000.0]
    controller = build_controller(api, [WidgetReconciler()], elector=Standby(), enqueue=lambda key: True,
                                  pump=lambda: 0, mirror=False, clock=lambda: now[0], checkpoint_seconds=300)
    try:
        for _ in range(3):
            controller.step()
            now[0] += 400
        assert controller.checkpoints == 0 and not checkpoint.checkpoint_dir().exists()
    finally:
        controller.shutdown()


def test_the_cluster_copy_catches_removed_checkpoint_files(api):
    first = checkpoint.checkpoint_write(api)
    second = checkpoint.checkpoint_write(api)
    assert checkpoint.configmap_check(api) == []
    second.path.unlink()  # fall back to checkpoint 1, as someone hiding what checkpoint 2 saw would
    assert [(p.ident, p.problem) for p in checkpoint.configmap_check(api)] == [("2 configmap", "removed")]
    first.path.unlink()
    assert "the newest file is none" in checkpoint.configmap_check(api)[0].detail
