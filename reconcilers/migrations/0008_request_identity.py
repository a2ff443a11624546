"""Reconcile requests join the verified record: `identity_hash` (see ReconcileRequest) is added and computed for
the rows stored before; on PostgreSQL a trigger refuses an UPDATE that changes the identity (id, key, token,
actor, reason, idempotency_key, requested_at, identity_hash), every DELETE, and TRUNCATE (0006's function)."""

import importlib

from django.db import migrations, models

from reconcilers.models.chain import request_identity_hash

_0002 = importlib.import_module("reconcilers.migrations.0002_append_only_triggers")
TABLE = "reconcilers_reconcilerequest"
IDENTITY = ("id", "key", "token", "actor", "reason", "idempotency_key", "requested_at", "identity_hash")

FORWARD = [
    """
    CREATE OR REPLACE FUNCTION reconcilers_request_guard() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' AND (IDENTITY_UNCHANGED) THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION '% keeps its identity: % refused', TG_TABLE_NAME, TG_OP
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'a reconcile request''s identity is never changed nor the request deleted';
    END;
    $$;
    """.replace("IDENTITY_UNCHANGED", " AND ".join(f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}" for c in IDENTITY)),
    f"CREATE TRIGGER {TABLE}_identity BEFORE UPDATE OR DELETE ON {TABLE} "
    f"FOR EACH ROW EXECUTE FUNCTION reconcilers_request_guard();",
    f"CREATE TRIGGER {TABLE}_no_truncate BEFORE TRUNCATE ON {TABLE} "
    f"FOR EACH STATEMENT EXECUTE FUNCTION reconcilers_refuse_truncate();",
]
BACKWARD = [
    f"DROP TRIGGER IF EXISTS {TABLE}_no_truncate ON {TABLE};",
    f"DROP TRIGGER IF EXISTS {TABLE}_identity ON {TABLE};",
    "DROP FUNCTION IF EXISTS reconcilers_request_guard();",
]


def hash_existing(apps, schema_editor):
    ReconcileRequest = apps.get_model("reconcilers", "ReconcileRequest")
    for row in ReconcileRequest.objects.values().iterator():
        ReconcileRequest.objects.filter(pk=row["id"]).update(identity_hash=request_identity_hash(row))


class Migration(migrations.Migration):
    dependencies = [("reconcilers", "0007_hash_version")]

    operations = [
        migrations.AddField(
            model_name="reconcilerequest", name="identity_hash",
            field=models.CharField(blank=True, help_text="sha256 of the request's identity", max_length=64),
        ),
        migrations.RunPython(hash_existing, migrations.RunPython.noop),
        _0002.PostgreSQLOnlyRunSQL(sql=FORWARD, reverse_sql=BACKWARD),
    ]
