"""The engine's side reaches the web project's pieces without importing them (issue 39): the Celery app is
`celery.current_app` in every thread, and `ActionRecord` belongs to the reconcilers app, moved there in Django's
state only (its table, `accounts_actionrecord`, untouched). The import-linter contracts in pyproject.toml hold the
imports themselves (`tests/test_quality.py`)."""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import call_command

from opsconsole.celery import app
from reconcilers.engine import dispatch
from reconcilers.models import ActionRecord


def test_the_engine_sends_through_the_projects_celery_app_from_any_thread() -> None:
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(dispatch.app._get_current_object()))
    thread.start()
    thread.join()
    assert seen == [app]  # a drain thread or a background read, not Celery's fallback app
    assert dispatch.app._get_current_object() is app
    assert dispatch.celery_queue() == app.conf.task_default_queue


def test_action_record_lives_in_reconcilers_models_and_keeps_its_table() -> None:
    from opsconsole.accounts import models as accounts_models

    assert ActionRecord._meta.app_label == "reconcilers"
    assert ActionRecord._meta.db_table == "accounts_actionrecord"
    assert accounts_models.ActionRecord is ActionRecord  # still importable from the accounts app


@pytest.mark.django_db
@pytest.mark.parametrize(("app_label", "migration"), [("reconcilers", "0014"), ("accounts", "0008")])
def test_the_move_runs_nothing_on_the_database(app_label: str, migration: str) -> None:
    out = io.StringIO()
    call_command("sqlmigrate", app_label, migration, stdout=out)
    statements = [line for line in out.getvalue().splitlines()
                  if line.strip() and not line.startswith("--") and line.strip() not in {"BEGIN;", "COMMIT;"}]
    assert statements == [], out.getvalue()


@pytest.mark.django_db
def test_no_model_change_is_left_without_a_migration() -> None:
    call_command("makemigrations", "--check", "--dry-run", stdout=io.StringIO())  # SystemExit(1) when one is
