"""On PostgreSQL, triggers refuse UPDATE and DELETE on the append-only audit tables (Transition, ReconcileRun).

Not TRUNCATE: the test framework empties tables with TRUNCATE between tests. Other databases rely on the
ORM's refusal (reconcilers.models.base) and on `manage.py audit_verify`. A later migration that must rewrite
these rows has to `ALTER TABLE ... DISABLE TRIGGER` around it, deliberately.
"""

from django.db import migrations

TABLES = ("reconcilers_transition", "reconcilers_reconcilerun")

FORWARD = [
    """
    CREATE OR REPLACE FUNCTION reconcilers_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'audit rows are never changed; see manage.py audit_verify';
    END;
    $$;
    """,
    *(
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION reconcilers_refuse_change();"
        for table in TABLES
    ),
]
BACKWARD = [
    *(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table};" for table in TABLES),
    "DROP FUNCTION IF EXISTS reconcilers_refuse_change();",
]


class PostgreSQLOnlyRunSQL(migrations.RunSQL):
    """RunSQL applied only when the connection is PostgreSQL (a no-op on SQLite)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    dependencies = [("reconcilers", "0001_initial")]

    operations = [PostgreSQLOnlyRunSQL(sql=FORWARD, reverse_sql=BACKWARD)]
