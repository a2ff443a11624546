"""Hash format 2: transitions and spec revisions record which format their hash is in (`hash_version`). Rows
stored before keep format 1 (the column is added with 1 for them); new rows are written in format 2, which
also covers `resource_id` (see reconcilers.engine.audit). Adding a column updates no row, so the append-only
triggers are not involved."""

from django.db import migrations, models


def _field(default: int) -> models.PositiveSmallIntegerField:
    if default == 1:
        return models.PositiveSmallIntegerField(default=1)
    return models.PositiveSmallIntegerField(
        default=2, db_default=2, help_text="the hash format (reconcilers.engine.audit): 1 before migration 0007")


class Migration(migrations.Migration):
    dependencies = [("reconcilers", "0006_refuse_truncate")]

    operations = [
        op
        for model in ("transition", "specrevision")
        for op in (
            migrations.AddField(model_name=model, name="hash_version", field=_field(1)),
            migrations.AlterField(model_name=model, name="hash_version", field=_field(2)),
        )
    ]
