"""Issue 41: hash format 3: transitions, spec revisions and healing records written from now on are hashed with
their `cluster` too (`reconcilers.engine.audit_encoding`). Only the Python default of `hash_version` moves to 3;
the database default stays 2 and no row is rewritten: rows of formats 1 and 2 keep verifying with their own."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("reconcilers", "0020_clusters"),
    ]

    operations = [
        migrations.AlterField(
            model_name="transition",
            name="hash_version",
            field=models.PositiveSmallIntegerField(
                db_default=2, default=3,
                help_text="the hash format (reconcilers.engine.audit): 1 before migration 0007, 2 before 0021"),
        ),
        migrations.AlterField(
            model_name="specrevision",
            name="hash_version",
            field=models.PositiveSmallIntegerField(
                db_default=2, default=3,
                help_text="the hash format (reconcilers.engine.audit): 1 before migration 0007, 2 before 0021"),
        ),
        migrations.AlterField(
            model_name="healingrecord",
            name="hash_version",
            field=models.PositiveSmallIntegerField(
                db_default=2, default=3, help_text="the hash format (reconcilers.engine.audit): 2 before migration 0021"),
        ),
    ]
