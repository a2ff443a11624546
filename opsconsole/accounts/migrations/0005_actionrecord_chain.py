"""The action record becomes one hash chain: `seq`, `prev_hash`, `hash` (see ActionRecord). The records stored
before are chained here, in id order, with the append-only trigger disabled for that one deliberate rewrite
(as migration reconcilers 0002 prescribes); then `seq` is required and unique."""

from django.db import migrations, models

from reconcilers.models.chain import action_hash

TABLE = "accounts_actionrecord"


def chain_existing(apps, schema_editor):
    ActionRecord = apps.get_model("accounts", "ActionRecord")
    connection = schema_editor.connection
    postgresql = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        if postgresql:
            cursor.execute(f"ALTER TABLE {TABLE} DISABLE TRIGGER {TABLE}_append_only")
        prev = ""
        for seq, row in enumerate(ActionRecord.objects.order_by("id").values().iterator(), start=1):
            row["seq"] = seq
            digest = action_hash(row, prev)
            cursor.execute(f"UPDATE {TABLE} SET seq = %s, prev_hash = %s, hash = %s WHERE id = %s",
                           [seq, prev, digest, row["id"]])
            prev = digest
        if postgresql:
            cursor.execute(f"ALTER TABLE {TABLE} ENABLE TRIGGER {TABLE}_append_only")


class Migration(migrations.Migration):
    dependencies = [("accounts", "0004_actionrecord_refuse_truncate")]

    operations = [
        migrations.AddField(model_name="actionrecord", name="seq", field=models.PositiveBigIntegerField(null=True)),
        migrations.AddField(model_name="actionrecord", name="prev_hash",
                            field=models.CharField(blank=True, default="", max_length=64), preserve_default=False),
        migrations.AddField(model_name="actionrecord", name="hash",
                            field=models.CharField(default="", max_length=64), preserve_default=False),
        migrations.RunPython(chain_existing, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="actionrecord", name="seq",
            field=models.PositiveBigIntegerField(help_text="the record's place in the chain: 1, 2, 3…", unique=True),
        ),
    ]
