"""One actor name per rollback (issue 43): the automatic path's rollback is `rollback:auto` on its
`rollback.started` record (its actor and the `by` in its detail), in the resource's rollback state, in the
RollingBack condition's message and on the transitions, never the `controller` that called it; a person's is
`rollback:user:<name>`, asked by `user:<name>`."""

from __future__ import annotations

import pytest

from reconcilers.engine.healing import rollback, state
from reconcilers.models import HealingAction, HealingRecord
from tests.reconcilers.engine.test_rollback_lifecycle import REC, broken, live_of, mirror, ns  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_automatic_rollback_names_itself_one_way_everywhere(kapi, ns):  # noqa: F811
    res = broken(kapi, ns)
    started = rollback.rollback_apply(kapi, REC, res.id, 1, actor="controller", reason="bad", auto=True)
    res.refresh_from_db()
    assert (started.action, started.actor, started.detail["by"]) == (HealingAction.ROLLBACK_STARTED,
                                                                     "rollback:auto", "rollback:auto")
    assert res.rollback["actor"] == res.rollback["by"] == "rollback:auto"
    assert "controller" not in state.rollback_message(res.rollback)
    res = mirror(live_of(kapi, res), "Running", actor=res.rollback["actor"])
    names = set(HealingRecord.objects.filter(resource_uid=res.uid).values_list("actor", flat=True))
    last = res.transitions.order_by("-seq").first()
    assert names == {"rollback:auto"} and (last.to_phase, last.actor) == ("Running", "rollback:auto")


def test_a_persons_rollback_is_asked_by_them_and_acted_as_the_rollback(kapi, ns):  # noqa: F811
    res = broken(kapi, ns, "p")
    started = rollback.rollback_apply(kapi, REC, res.id, 1, actor="user:alice", reason="bad")
    assert (started.actor, started.detail["by"]) == ("rollback:user:alice", "user:alice")
    res.refresh_from_db()
    assert "by rollback:user:alice" in state.rollback_message(res.rollback)
