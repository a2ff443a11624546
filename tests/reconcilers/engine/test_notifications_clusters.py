"""Issue 41: every cluster's controller steps the healing evaluator, so `notifications.deliver_due` runs in several
processes at once. It is safe so: a row is claimed by a conditional UPDATE before its POST, so two controllers
that selected the same due rows (the worst case, forced here: both hold the same snapshot before either claims)
send each row once, and each delivery is counted by exactly one of them."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from reconcilers.engine.healing import notifications
from reconcilers.models import NotificationDelivery
from tests.reconcilers.engine.test_notifications import Receiver, _configure, _escalate

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server():
    made = Receiver([200])
    yield made
    made.close()


def test_two_controllers_delivering_the_same_due_rows_at_once_send_each_row_once(settings, server, monkeypatch):
    _configure(settings, server.url)
    for uid in ("c1", "c2", "c3"):
        _escalate(uid)
    assert NotificationDelivery.objects.filter(state="pending").count() == 3
    both_selected = threading.Barrier(2, timeout=30)
    real_receivers = notifications.receivers

    def receivers_after_both_selected() -> list:
        both_selected.wait()  # called after a controller read its due rows, before it claims any
        return real_receivers()

    monkeypatch.setattr(notifications, "receivers", receivers_after_both_selected)
    results: list[notifications.Sent] = []
    errors: list[BaseException] = []

    def controller() -> None:
        try:
            results.append(notifications.deliver_due())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=controller) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(results) == 2
    assert len(server.got) == 3  # each row POSTed once
    assert sum(r.delivered for r in results) == 3 and sum(r.failed + r.retrying for r in results) == 0
    assert set(NotificationDelivery.objects.values_list("state", "attempts")) == {("delivered", 1)}
