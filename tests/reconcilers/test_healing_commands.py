"""`manage.py rollback`, `suspend`, `resume`, `pin`, `unpin` against kubesim: the same services as the API, the
object named as `manage.py reconcile` names it, the actor `user:<--as>`, an ActionRecord per attempt, and a
refusal as a clear error with a non-zero exit."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from reconcilers.engine.healing.suspend import SUSPENDED, SUSPENDED_UNTIL
from reconcilers.models import ActionRecord, HealingRecord
from tests.opsconsole.api.test_healing_api import Cluster

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cluster(kapi, queue, reconcilers) -> Cluster:  # noqa: F811 - queue is the fixture imported above
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    return Cluster(kapi)


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def last_record() -> ActionRecord:
    return ActionRecord.objects.order_by("-id").first()


def test_rollback_restores_the_spec_with_the_actor_and_reason(cluster):
    res = cluster.gadget(cluster.inside, "g1", generations=2)
    out = run("rollback", "Gadget", f"{cluster.inside}/g1", "--to-generation", "1", "--reason", "size 2 breaks",
              "--as", "ann")
    assert "rollback.started" in out and "by rollback:user:ann" in out
    assert cluster.live(res)["spec"]["size"] == 1
    record = HealingRecord.objects.get(resource=res, action="rollback.started")
    assert (record.actor, record.reason, record.target_generation) == ("rollback:user:ann", "size 2 breaks", 1)
    action = last_record()
    assert (action.action, action.outcome, action.auth, action.actor, action.method, action.target) == (
        "resource.rollback", "allowed", "command", "ann", "CLI", res.key)


def test_a_refused_rollback_is_an_error_and_recorded(cluster):
    res = cluster.gadget(cluster.inside, "g1", generations=2)
    with pytest.raises(CommandError, match=r"refused \(generation\)"):
        run("rollback", "gadgets", f"{cluster.inside}/g1", "--to-generation", "5", "--reason", "x")
    assert (last_record().outcome, last_record().status_code) == ("rejected", 400)
    with pytest.raises(CommandError, match="no Gadget"):
        run("rollback", "Gadget", f"{cluster.inside}/missing", "--to-generation", "1", "--reason", "x")
    assert last_record().status_code == 404
    assert last_record().target == f"test.opsconsole.io/v1/gadgets/{cluster.inside}/missing"  # its key, as every one
    with pytest.raises(CommandError, match="no reconciler"):
        run("rollback", "Widget", f"{cluster.inside}/w", "--to-generation", "1", "--reason", "x")
    assert last_record().target == f"Widget {cluster.inside}/w"  # no kind to make a key of: as typed
    assert cluster.live(res)["spec"]["size"] == 2


def test_suspend_for_a_while_then_resume(cluster, queue):  # noqa: F811
    res = cluster.gadget(cluster.inside, "g1")
    run("suspend", "Gadget", f"{cluster.inside}/g1", "--reason", "maintenance", "--for", "30m", "--as", "bob")
    annotations = cluster.live(res)["metadata"]["annotations"]
    assert annotations[SUSPENDED] == "maintenance" and annotations[SUSPENDED_UNTIL]
    res.refresh_from_db()
    assert res.suspended and res.suspension["actor"] == "user:bob"
    with pytest.raises(CommandError, match="--for"):
        run("suspend", "Gadget", f"{cluster.inside}/g1", "--reason", "x", "--for", "soon")
    run("resume", "Gadget", f"{cluster.inside}/g1", "--reason", "done")
    assert SUSPENDED not in (cluster.live(res)["metadata"].get("annotations") or {})
    with pytest.raises(CommandError, match="not suspended"):
        run("resume", "Gadget", f"{cluster.inside}/g1", "--reason", "again")
    assert list(ActionRecord.objects.order_by("id").values_list("action", "status_code")) == [
        ("resource.suspend", 202), ("resource.suspend", 400), ("resource.resume", 202), ("resource.resume", 409)]


def test_pin_and_unpin(cluster):
    res = cluster.gadget(cluster.inside, "g1", generations=2)
    run("pin", "Gadget", f"{cluster.inside}/g1", "--generation", "2", "--reason", "known good")
    res.refresh_from_db()
    assert res.pinned_generation == 2
    run("unpin", "Gadget", f"{cluster.inside}/g1", "--reason", "moving on")
    res.refresh_from_db()
    assert res.pinned_generation is None
    with pytest.raises(CommandError, match="no generation is pinned"):
        run("unpin", "Gadget", f"{cluster.inside}/g1", "--reason", "again")
