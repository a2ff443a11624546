"""Notifications through the outbox, to a real HTTP server on 127.0.0.1 (http.server in a thread): the records
that need a person get a delivery per receiver in their transaction; the Alertmanager v2 body and the JSON body;
a receiver that answers 500 then 200 is retried and each attempt recorded; one that never answers fails after its
retries and is logged; the header secret is stored and logged nowhere."""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from reconcilers.engine.healing import notifications, rollback
from reconcilers.models import HealingAction, NotificationDelivery, Resource
from tests.reconcilers.audit_support import observed, record

pytestmark = pytest.mark.django_db

SECRET = "Bearer s3cret-token-value"


class Receiver:
    """An HTTP server that answers each POST with the next status of `statuses` (the last one repeats), after
    `delay` seconds, and keeps what it received."""

    def __init__(self, statuses: list[int], delay: float = 0.0) -> None:
        self.statuses, self.delay, self.got = list(statuses), delay, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.got.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
                if outer.delay:
                    time.sleep(outer.delay)
                status = outer.statuses.pop(0) if len(outer.statuses) > 1 else outer.statuses[0]
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"no" if status >= 300 else b"ok")
                except OSError:
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v2/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made: list[Receiver] = []

    def make(statuses: list[int], delay: float = 0.0) -> Receiver:
        made.append(Receiver(statuses, delay))
        return made[-1]

    yield make
    for r in made:
        r.close()


def _configure(settings, url: str, **extra: Any) -> None:
    settings.OPSCONSOLE_NOTIFICATIONS = [{"name": "am", "url": url, "headers": {"Authorization": SECRET},
                                          "format": "alertmanager", "backoff": 0, **extra}]
    settings.OPSCONSOLE_CONSOLE_URL = "https://ops.example.com"


def _escalate(uid: str) -> Resource:
    record(observed(uid), "Pending")
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(uid=uid)
        rollback.escalate_locked(row, HealingAction.ROLLBACK_REFUSED, "no earlier generation was ready",
                                 timezone.now())
        row.save()
    return row


def _later(seconds: float = 3600) -> Any:
    return timezone.now() + timedelta(seconds=seconds)


def test_an_escalation_is_delivered_to_alertmanager_with_its_labels(settings, receiver):
    server = receiver([200])
    _configure(settings, server.url)
    res = _escalate("n1")
    rows = list(NotificationDelivery.objects.all())
    # one delivery: the rollback.refused record (its rollback_failed anomaly.detected is not told twice)
    assert [(d.record.action, d.receiver, d.state) for d in rows] == [(HealingAction.ROLLBACK_REFUSED, "am",
                                                                       "pending")]
    sent = notifications.deliver_due()
    assert (sent.delivered, sent.retrying, sent.failed) == (1, 0, 0)
    [got] = server.got
    assert got["path"] == "/api/v2/alerts" and got["headers"]["Authorization"] == SECRET
    [alert] = got["body"]
    assert alert["labels"] == {"alertname": "OpsconsoleRollbackFailed", "severity": "critical", "kind": "Memcached",
                               "namespace": "default", "name": res.name, "rule": "rollback_failed",
                               "action": "rollback.refused"}
    assert "no earlier generation was ready" in alert["annotations"]["description"]
    assert alert["startsAt"] < alert["endsAt"]
    assert alert["generatorURL"] == f"https://ops.example.com/resources/{res.pk}/#healing"
    row = NotificationDelivery.objects.get()
    assert (row.state, row.attempts, row.last_status) == ("delivered", 1, 200) and row.delivered_at is not None
    assert SECRET not in json.dumps(row.payload) and SECRET not in row.url
    assert notifications.deliver_due(_later()).delivered == 0  # sent once


def test_a_json_receiver_gets_the_record_of_an_anomaly_that_does_not_roll_back(settings, receiver):
    server = receiver([204])
    settings.OPSCONSOLE_NOTIFICATIONS = [{"name": "hook", "url": server.url + "?token=abc", "format": "json"}]
    record(observed("n2"), "Pending")
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(uid="n2")
        rollback.anomaly_raise_locked(row, "stuck", "Pending for too long", timezone.now())  # rollback: false
        row.save()
    Resource.objects.filter(uid="n2").update(auto_rollback=True)
    with transaction.atomic():  # backoff rolls back, and automatic rollback is on: no person needed, no notice
        row = Resource.objects.select_for_update().get(uid="n2")
        rollback.anomaly_raise_locked(row, "backoff", "3 events", timezone.now())
        row.save()
    delivery = NotificationDelivery.objects.get()
    assert delivery.record.rule == "stuck" and "abc" not in delivery.url
    assert notifications.deliver_due().delivered == 1
    body = server.got[0]["body"]
    assert (body["action"], body["rule"], body["kind"], body["uid"]) == ("anomaly.detected", "stuck", "Memcached",
                                                                         "n2")
    assert body["record"]["seq"] == delivery.record.seq


def test_a_failing_receiver_is_retried_and_each_attempt_recorded(settings, receiver):
    server = receiver([500, 200])
    _configure(settings, server.url, retries=3)
    _escalate("n3")
    sent = notifications.deliver_due()
    assert (sent.delivered, sent.retrying) == (0, 1)
    row = NotificationDelivery.objects.get()
    assert (row.state, row.attempts, row.last_status) == ("pending", 1, 500)
    assert row.last_error.startswith("HTTP 500")
    assert notifications.delivery_state(row) == "retrying"
    sent = notifications.deliver_due(_later())
    assert sent.delivered == 1
    row.refresh_from_db()
    assert (row.state, row.attempts, row.last_status, row.last_error) == ("delivered", 2, 200, "")
    assert len(server.got) == 2


def test_a_receiver_that_never_answers_fails_after_the_retries(settings, receiver, caplog):
    server = receiver([200], delay=2.0)
    _configure(settings, server.url, retries=2, timeout=0.3)
    _escalate("n4")
    caplog.set_level(logging.INFO)
    started = time.monotonic()
    for _ in range(3):
        notifications.deliver_due(_later())
    assert time.monotonic() - started < 5  # each attempt bounded by the timeout
    row = NotificationDelivery.objects.get()
    assert (row.state, row.attempts, row.last_status) == ("failed", 3, None)
    assert "no answer within 0.3s" in row.last_error
    assert notifications.deliver_due(_later(7200)).failed == 0  # given up: not tried again
    assert "giving up" in caplog.text and SECRET not in caplog.text
    assert len(server.got) == 3


def test_a_bad_receiver_setting_names_the_field(settings):
    settings.OPSCONSOLE_NOTIFICATIONS = [{"name": "x", "url": "ftp://nope", "format": "json"}]
    with pytest.raises(notifications.ReceiverError, match=r"\[0\]\.url"):
        notifications.receivers()
    settings.OPSCONSOLE_NOTIFICATIONS = [{"name": "x", "url": "https://a.example", "format": "slack"}]
    with pytest.raises(notifications.ReceiverError, match=r"\.format"):
        notifications.receivers()


def test_a_refused_write_the_automatic_path_tries_again_is_not_notified(settings, receiver):
    """A conflict on the rollback's write (`rollback.failed`, not escalated: the next step tries again) needs
    nobody; the escalation after it does."""
    from reconcilers.engine.healing.records import healing_append

    _configure(settings, receiver([200]).url)
    record(observed("conflict"), "Pending")
    with transaction.atomic():
        row = Resource.objects.select_for_update().get(uid="conflict")
        quiet = healing_append(row, HealingAction.ROLLBACK_FAILED, actor="rollback:auto", reason="409 Conflict",
                               detail={"written": False, "status": 409, "escalated": False})
        loud = rollback.escalate_locked(row, HealingAction.ROLLBACK_FAILED, "the restored spec was refused",
                                        timezone.now())
        row.save()
    assert not NotificationDelivery.objects.filter(record=quiet).exists()
    assert NotificationDelivery.objects.filter(record__resource=row, record__seq__gt=quiet.seq).count() == 1
    assert loud.reason == "RollbackFailed"
