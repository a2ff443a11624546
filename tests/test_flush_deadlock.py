"""The suite's own plumbing: a flush that loses a deadlock to an engine still writing is tried again
(tests/fixtures/flush.py); any other flush failure still fails."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import OperationalError, connection

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_flush_that_lost_a_deadlock_is_tried_again(monkeypatch):
    real, calls = connection.ops.execute_sql_flush, []

    def once_deadlocked(sql_list):
        calls.append(len(sql_list))
        if len(calls) == 1:
            raise OperationalError("deadlock detected\nDETAIL:  Process 1 waits for AccessExclusiveLock")
        return real(sql_list)

    monkeypatch.setattr(connection.ops, "execute_sql_flush", once_deadlocked)
    call_command("flush", interactive=False, verbosity=0)
    assert len(calls) == 2


def test_any_other_flush_failure_still_fails(monkeypatch):
    def broken(sql_list):
        raise OperationalError("relation does not exist")

    monkeypatch.setattr(connection.ops, "execute_sql_flush", broken)
    with pytest.raises(CommandError):
        call_command("flush", interactive=False, verbosity=0)
