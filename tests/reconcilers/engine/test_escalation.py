"""Escalation on record (no cluster): acknowledge, assign and resolve an anomaly that needs a person are chained
healing records that `chain_verify` checks (a tampered one is reported); bad input names the field; an anomaly the
automatic path handles needs no person; the unacknowledged gauge."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from reconcilers.engine import metrics
from reconcilers.engine.audit import EDITED, HEALING, chain_verify
from reconcilers.engine.healing import escalation, person, rollback
from reconcilers.engine.healing.evaluator import Evaluator
from reconcilers.kinds.memcached import MemcachedReconciler
from reconcilers.models import HealingAction, HealingRecord, Resource
from tests.reconcilers.audit_support import observed, record, tamper

pytestmark = pytest.mark.django_db

REC = MemcachedReconciler()


def _raise(uid: str, rule: str, *, ago: float = 0) -> Resource:
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(uid=uid)
        rollback.anomaly_raise_locked(row, rule, f"{rule} matched", timezone.now() - timedelta(seconds=ago))
        row.save()
    return row


def _refused(call, field: str, status: int) -> str:
    with pytest.raises(rollback.RollbackRefused) as caught:
        call()
    assert (caught.value.field, caught.value.status) == (field, status), caught.value.message
    return caught.value.message


def test_acknowledge_assign_resolve_are_chained_records_and_audit_verify_checks_them():
    User.objects.create_user("bob")
    record(observed("esc1"), "Pending")
    res = _raise("esc1", "stuck")  # the default stuck rule does not roll back: it needs a person
    assert person.rules_needing_person(res, REC) == ["stuck"]

    ack = escalation.anomaly_acknowledge(res.pk, "stuck", actor="user:alice", note="looking")
    res.refresh_from_db()
    entry = res.active_anomalies["stuck"]
    assert entry["acknowledged"]["by"] == "user:alice" and entry["acknowledged"]["note"] == "looking"
    assert (ack.action, ack.actor, ack.rule, ack.reason, ack.generation) == (
        HealingAction.ANOMALY_ACKNOWLEDGED, "user:alice", "stuck", "looking", res.generation)
    _refused(lambda: escalation.anomaly_acknowledge(res.pk, "stuck", actor="user:alice"), "rule", 409)

    assigned = escalation.anomaly_assign(res.pk, "stuck", actor="user:alice", assignee="bob", note="yours")
    res.refresh_from_db()
    assert res.active_anomalies["stuck"]["assignee"]["to"] == "user:bob"
    assert assigned.detail["assignee"] == "user:bob"
    _refused(lambda: escalation.anomaly_assign(res.pk, "stuck", actor="user:alice", assignee="nobody"),
             "assignee", 400)

    _refused(lambda: escalation.anomaly_resolve(res.pk, "stuck", actor="user:bob", note="  "), "note", 400)
    resolved = escalation.anomaly_resolve(res.pk, "stuck", actor="user:bob", note="fixed the image")
    res.refresh_from_db()
    assert "stuck" not in res.active_anomalies
    assert res.anomalies_resolved["stuck"] == {"generation": res.generation, "record": resolved.seq,
                                               "by": "user:bob", "at": res.anomalies_resolved["stuck"]["at"]}
    assert resolved.reason == "fixed the image"
    _refused(lambda: escalation.anomaly_resolve(res.pk, "stuck", actor="user:bob", note="x"), "rule", 409)
    _refused(lambda: escalation.anomaly_acknowledge(res.pk, "no-such-rule", actor="user:bob"), "rule", 400)

    report = chain_verify()
    assert report.ok, [b.describe() for b in report.breaks]
    assert report.healing == 4  # detected, acknowledged, assigned, resolved
    tamper([("UPDATE reconcilers_healingrecord SET reason = %s WHERE id = %s", ("nothing was done", resolved.id))])
    report = chain_verify()
    assert [(b.item, b.problem, b.seq) for b in report.breaks] == [(HEALING, EDITED, resolved.seq)]


def test_an_anomaly_automatic_rollback_handles_needs_no_person():
    record(observed("esc2"), "Pending")
    Resource.objects.filter(uid="esc2").update(auto_rollback=True)
    res = _raise("esc2", "backoff")  # rolls back, and automatic rollback is on for the object
    assert person.rules_needing_person(res, REC) == []
    _refused(lambda: escalation.anomaly_acknowledge(res.pk, "backoff", actor="user:a"), "rule", 409)
    Resource.objects.filter(uid="esc2").update(auto_rollback=False)  # off: nothing acts on it but a person
    res.refresh_from_db()
    assert person.rules_needing_person(res, REC) == ["backoff"]
    done = escalation.anomaly_acknowledge(res.pk, "backoff", actor="user:a")
    assert done.action == HealingAction.ANOMALY_ACKNOWLEDGED


def test_resolving_rollback_failed_keeps_the_escalated_rollback_on_record():
    record(observed("esc3"), "Pending")
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(uid="esc3")
        rollback.escalate_locked(row, HealingAction.ROLLBACK_REFUSED, "no earlier generation was ready",
                                 timezone.now())
        row.save()
    row.refresh_from_db()
    assert metrics.ROLLBACK_FAILED_RULE in row.active_anomalies
    done = escalation.anomaly_resolve(row.pk, metrics.ROLLBACK_FAILED_RULE, actor="user:a", note="fixed by hand")
    row.refresh_from_db()
    assert row.active_anomalies == {}
    assert row.rollback["state"] == "refused" and row.rollback["resolved"]["record"] == done.seq
    assert HealingRecord.objects.filter(resource=row, action=HealingAction.ANOMALY_RESOLVED).count() == 1


def test_the_unacknowledged_gauge_is_the_age_of_the_oldest_anomaly_needing_a_person():
    from prometheus_client import REGISTRY

    record(observed("esc4"), "Pending")
    with transaction.atomic():  # rollback_failed: the rules step leaves it (a stuck anomaly would clear here)
        res = Resource.objects.select_for_update().get(uid="esc4")
        rollback.escalate_locked(res, HealingAction.ROLLBACK_REFUSED, "none good", timezone.now() - timedelta(
            seconds=600))
        res.save()
    evaluator = Evaluator(None, [REC], annotations=lambda _rec, _res: {}, enqueue=lambda keys: None)
    evaluator.step()

    def gauge() -> float:
        return REGISTRY.get_sample_value("opsconsole_anomalies_unacknowledged_seconds", {"kind": "Memcached"})

    assert gauge() >= 600
    escalation.anomaly_acknowledge(res.pk, metrics.ROLLBACK_FAILED_RULE, actor="user:a")
    evaluator.step()
    assert gauge() == 0


def test_the_anomaly_command_acknowledges_assigns_and_resolves_with_an_action_record_each(workqueue):
    import io

    from django.contrib.auth.models import Group
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from reconcilers.models import ActionRecord

    carol = User.objects.create_user("carol")
    carol.groups.add(Group.objects.get_or_create(name="operator")[0])
    record(observed("esc5"), "Pending")
    res = _raise("esc5", "stuck")
    target = f"{res.namespace}/{res.name}"

    def run(*args: str) -> str:
        out = io.StringIO()
        call_command("anomaly", *args, stdout=out)
        return out.getvalue()

    assert "anomaly.acknowledged" in run("acknowledge", "memcached", target, "--rule", "stuck", "--as", "dave")
    assert "anomaly.assigned" in run("assign", "memcached", target, "--rule", "stuck", "--to", "carol", "--as", "dave")
    with pytest.raises(CommandError, match="note"):
        run("resolve", "memcached", target, "--rule", "stuck", "--as", "dave")
    refused = ActionRecord.objects.order_by("-id").first()
    assert (refused.action, refused.status_code, refused.auth) == ("anomaly.resolve", 400, "command")
    assert "anomaly.resolved" in run("resolve", "memcached", target, "--rule", "stuck", "--note", "done",
                                     "--as", "dave")
    actors = set(HealingRecord.objects.filter(resource=res).exclude(actor="controller")
                 .values_list("actor", flat=True))
    assert actors == {"user:dave"}
    assert ActionRecord.objects.filter(action__startswith="anomaly.", status_code=202).count() == 3
    assert workqueue.sent.keys == [res.key]  # resolving enqueues the resource (a private queue: nothing leaks)
