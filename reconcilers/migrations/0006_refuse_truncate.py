"""On PostgreSQL the append-only tables refuse TRUNCATE too: a statement-level `BEFORE TRUNCATE` trigger on
Transition, ReconcileRun, SpecRevision and Anomaly (the action record gets one in accounts 0004, reconcile
requests in 0008). `TRUNCATE ... CASCADE` fires it on every table it would empty, so it is refused as well.

Anomaly becomes append-only like the other record tables (nothing in the product ever changed one): the ORM
refuses updates and deletes, and the row trigger of migration 0002 refuses them in SQL.

Django's test framework empties the tables with TRUNCATE between transactional tests. The trigger lets a
TRUNCATE through only in a database whose name starts with `test_` (Django's test databases) *and* when the
session says `opsconsole.test_flush = 'on'`; this migration sets that as the database's default, for test
databases only. A production database is never named so by Django, and the setting alone opens nothing.
"""

import importlib

from django.db import migrations

_0002 = importlib.import_module("reconcilers.migrations.0002_append_only_triggers")

TABLES = ("reconcilers_transition", "reconcilers_reconcilerun", "reconcilers_specrevision", "reconcilers_anomaly")

FUNCTION = r"""
CREATE OR REPLACE FUNCTION reconcilers_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_database() LIKE 'test\_%' AND current_setting('opsconsole.test_flush', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION '% is append-only: TRUNCATE refused', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'audit rows are never removed; see manage.py audit_verify';
END;
$$;
"""

FORWARD = [
    FUNCTION,
    *(f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
      f"FOR EACH STATEMENT EXECUTE FUNCTION reconcilers_refuse_truncate();" for table in TABLES),
    "CREATE TRIGGER reconcilers_anomaly_append_only BEFORE UPDATE OR DELETE ON reconcilers_anomaly "
    "FOR EACH ROW EXECUTE FUNCTION reconcilers_refuse_change();",
]
BACKWARD = [
    "DROP TRIGGER IF EXISTS reconcilers_anomaly_append_only ON reconcilers_anomaly;",
    *(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table};" for table in TABLES),
    "DROP FUNCTION IF EXISTS reconcilers_refuse_truncate();",
]


def allow_test_flush(apps, schema_editor):
    """In a test database only: let Django's flush TRUNCATE (the database default, and this session)."""
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        name = cursor.fetchone()[0]
        if not name.startswith("test_"):
            return
        quoted = connection.ops.quote_name(name)
        cursor.execute(f"ALTER DATABASE {quoted} SET opsconsole.test_flush = 'on'")
        cursor.execute("SET opsconsole.test_flush = 'on'")


class Migration(migrations.Migration):
    dependencies = [("reconcilers", "0005_spec_revisions_out_of_band")]

    operations = [
        migrations.AlterModelOptions(
            name="anomaly",
            options={"base_manager_name": "objects", "verbose_name_plural": "anomalies"},
        ),
        _0002.PostgreSQLOnlyRunSQL(sql=FORWARD, reverse_sql=BACKWARD),
        migrations.RunPython(allow_test_flush, migrations.RunPython.noop),
    ]
