"""`manage.py retention`: old unreferenced runs and old spans go; transitions, and any run the record points at,
stay; on PostgreSQL the append-only trigger still refuses every other delete."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from reconcilers.engine.retention import events_retention_delete, retention_apply, runs_retention_delete
from reconcilers.models import AppendOnlyError, KubeEvent, ReconcileRequest, ReconcileRun, Resource, Span, Transition
from tests.reconcilers.audit_support import observed, record

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=40)


def _span(span_id: str, start: datetime) -> Span:
    return Span.objects.create(trace_id="ab" * 16, span_id=span_id, name="reconcile Memcached", start_time=start,
                               end_time=start + timedelta(milliseconds=5), duration_ms=5.0)


@pytest.fixture
def history() -> dict[str, int]:
    """Old runs: one plain, one with a transition, one with an anomaly, one a request points at; a recent run."""
    plain = record(observed("uid-r1"), None, started_at=OLD).run_id
    with_transition = record(observed("uid-r2"), "Pending", started_at=OLD).run_id
    first = record(observed("uid-r3"), "Pending", started_at=NOW).run_id
    refused = record(observed("uid-r3"), "Deleted", started_at=OLD)
    assert refused.anomaly_id is not None and not refused.transition_ids
    requested = record(observed("uid-r4"), None, started_at=OLD).run_id
    ReconcileRequest.objects.create(key="k", token="t", actor="user:a", run_id=requested, state="succeeded")
    recent = record(observed("uid-r5"), None, started_at=NOW).run_id
    more_old = [record(observed(f"uid-p{i}"), None, started_at=OLD - timedelta(days=i)).run_id for i in range(5)]
    _span("1" * 16, OLD)
    _span("2" * 16, NOW)
    return {"plain": plain, "transition": with_transition, "anomaly": refused.run_id, "requested": requested,
            "recent": recent, "first": first, "more_old": len(more_old)}


def test_old_unreferenced_runs_and_old_spans_go_and_referenced_runs_and_transitions_stay(history) -> None:
    transitions = list(Transition.objects.order_by("id").values_list("id", "hash"))
    out = io.StringIO()
    call_command("retention", "--runs-days", "30", "--spans-days", "7", "--batch-size", "2", stdout=out)
    left = set(ReconcileRun.objects.values_list("id", flat=True))
    assert left == {history["transition"], history["anomaly"], history["requested"], history["recent"],
                    history["first"]}
    assert list(Transition.objects.order_by("id").values_list("id", "hash")) == transitions
    assert list(Span.objects.values_list("span_id", flat=True)) == ["2" * 16]
    assert "deleted 6 runs (3 older runs kept" in out.getvalue() and "1 spans" in out.getvalue()
    call_command("audit_verify", stdout=io.StringIO())


def test_a_dry_run_counts_and_deletes_nothing(history) -> None:
    before = ReconcileRun.objects.count()
    report = retention_apply(runs_days=30, spans_days=7, dry_run=True)
    assert (report.runs_deleted, report.runs_kept_referenced, report.spans_deleted) == (6, 3, 1)
    assert ReconcileRun.objects.count() == before and Span.objects.count() == 2


def test_only_the_table_asked_for_is_touched(history) -> None:
    retention_apply(runs_days=None, spans_days=7)
    assert ReconcileRun.objects.filter(id=history["plain"]).exists()
    assert Span.objects.count() == 1


def test_the_command_refuses_missing_or_too_small_windows() -> None:
    with pytest.raises(CommandError, match="--runs-days and/or --spans-days"):
        call_command("retention", stdout=io.StringIO())
    with pytest.raises(CommandError, match="at least 1"):
        call_command("retention", "--runs-days", "0", stdout=io.StringIO())


def test_the_orm_still_refuses_deleting_runs_after_retention(history) -> None:
    runs_retention_delete(NOW - timedelta(days=30))
    with pytest.raises(AppendOnlyError):
        ReconcileRun.objects.filter(id=history["recent"]).delete()


def test_on_postgresql_the_trigger_lets_only_the_retention_transaction_delete_runs_and_never_transitions(
        history) -> None:
    if connection.vendor != "postgresql":  # SQLite has no trigger: the ORM's refusal and the SQL guard hold
        transitions = Transition.objects.count()
        assert runs_retention_delete(NOW - timedelta(days=30)) == 6
        assert Transition.objects.count() == transitions == 2
        return
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cur:
        cur.execute("DELETE FROM reconcilers_reconcilerun WHERE id = %s", [history["plain"]])
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET LOCAL opsconsole.retention = 'on'")
        cur.execute("DELETE FROM reconcilers_transition")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET LOCAL opsconsole.retention = 'on'")
        cur.execute("UPDATE reconcilers_reconcilerun SET trace_id = 'forged'")
    runs_retention_delete(NOW - timedelta(days=30))
    assert not ReconcileRun.objects.filter(id=history["plain"]).exists()
    # SET LOCAL ended with its transaction: the next delete is refused again
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cur:
        cur.execute("DELETE FROM reconcilers_reconcilerun WHERE id = %s", [history["recent"]])
    assert ReconcileRun.objects.filter(id=history["recent"]).exists()


def _archived_events() -> Resource:
    resource = Resource.objects.create(uid="uid-ev", key="k-ev", version="v1", plural="p", kind="K", name="n")
    for i, observed_at in enumerate([OLD, OLD - timedelta(days=1), OLD, NOW]):
        KubeEvent.objects.create(resource=resource, event_uid=f"ev-{i}", count=1, name=f"e{i}", type="Warning",
                                 reason="Failed", observed_at=observed_at, last_timestamp=observed_at)
    return resource


def test_old_archived_events_go_in_batches_and_the_command_applies_the_setting_by_default(settings) -> None:
    _archived_events()
    assert retention_apply(runs_days=None, spans_days=None, events_days=30, dry_run=True).events_deleted == 3
    settings.OPSCONSOLE_EVENT_RETENTION_DAYS = 30
    out = io.StringIO()
    call_command("retention", "--spans-days", "7", "--batch-size", "2", stdout=out)
    assert "3 archived Events" in out.getvalue()
    assert list(KubeEvent.objects.values_list("event_uid", flat=True)) == ["ev-3"]


def test_events_are_kept_when_the_setting_is_zero_and_refused_a_too_small_window(settings) -> None:
    _archived_events()
    settings.OPSCONSOLE_EVENT_RETENTION_DAYS = 0
    call_command("retention", "--spans-days", "7", stdout=io.StringIO())
    assert KubeEvent.objects.count() == 4
    with pytest.raises(CommandError, match="at least 1"):
        call_command("retention", "--events-days", "0.5", stdout=io.StringIO())


def test_on_postgresql_only_the_retention_transaction_deletes_archived_events() -> None:
    _archived_events()
    if connection.vendor == "postgresql":
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cur:
            cur.execute("DELETE FROM reconcilers_kubeevent")
    with pytest.raises(AppendOnlyError):
        KubeEvent.objects.all().delete()
    assert events_retention_delete(NOW - timedelta(days=30)) == 3
    assert KubeEvent.objects.count() == 1
