"""Let the retention path, and only it, delete old ReconcileRun rows on PostgreSQL; Transition stays untouchable.

The append-only trigger function now lets a DELETE on `reconcilers_reconcilerun` through when the transaction
has said `SET LOCAL opsconsole.retention = 'on'` (a custom setting any role may set, scoped to that one
transaction; `reconcilers.engine.retention` is the one place that sets it). UPDATE is still refused on both
tables, and DELETE on `reconcilers_transition` is refused whatever the setting says.
"""

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION reconcilers_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'reconcilers_reconcilerun'
       AND current_setting('opsconsole.retention', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'audit rows are never changed; see manage.py audit_verify';
END;
$$;
"""

BACKWARD = """
CREATE OR REPLACE FUNCTION reconcilers_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'audit rows are never changed; see manage.py audit_verify';
END;
$$;
"""


class PostgreSQLOnlyRunSQL(migrations.RunSQL):
    """RunSQL applied only when the connection is PostgreSQL (a no-op on SQLite), as in 0002."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    dependencies = [("reconcilers", "0002_append_only_triggers")]

    operations = [PostgreSQLOnlyRunSQL(sql=FORWARD, reverse_sql=BACKWARD)]
